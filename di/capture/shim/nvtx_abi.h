/* The part of NVTX v3's injection interface that di's NVTX library implements, written
 * from NVIDIA's public NVTX documentation (nvToolsExt.h, nvtxDetail/nvtxTypes.h and
 * nvtxInit.h describe it): NVTX loads the library named by NVTX_INJECTION64_PATH at
 * its first call, calls its InitializeInjectionNvtx2(getExportTable), and the library
 * asks getExportTable(NVTX_ETID_CALLBACKS) for GetModuleFunctionTable, through which
 * it stores its own functions into the slots of each module (CORE, CORE2, ...).
 * Ids and layouts here are part of NVTX's stable ABI (NVTX v2 libraries and v3 headers
 * load the same injection libraries). */
#ifndef DI_NVTX_ABI_H
#define DI_NVTX_ABI_H
#include <stddef.h>
#include <stdint.h>
#include <wchar.h>

typedef void (*nvtx_fn)(void);
typedef nvtx_fn **nvtx_table; /* slot i: where NVTX keeps the pointer it calls for callback id i */
typedef const void *(*nvtx_get_export_table)(uint32_t id);

enum { NVTX_ETID_CALLBACKS = 1, NVTX_ETID_VERSIONINFO = 3 };
enum { NVTX_CB_MODULE_CORE = 1, NVTX_CB_MODULE_CORE2 = 5 };
enum { /* module CORE */
  CORE_MarkEx = 1, CORE_MarkA = 2, CORE_MarkW = 3, CORE_RangeStartEx = 4, CORE_RangeStartA = 5,
  CORE_RangeStartW = 6, CORE_RangeEnd = 7, CORE_RangePushEx = 8, CORE_RangePushA = 9, CORE_RangePushW = 10,
  CORE_RangePop = 11, CORE_NameCategoryA = 12, CORE_NameCategoryW = 13, CORE_NameOsThreadA = 14,
  CORE_NameOsThreadW = 15
};
enum { /* module CORE2: the domain API */
  CORE2_DomainMarkEx = 1, CORE2_DomainRangeStartEx = 2, CORE2_DomainRangeEnd = 3, CORE2_DomainRangePushEx = 4,
  CORE2_DomainRangePop = 5, CORE2_DomainNameCategoryA = 8, CORE2_DomainNameCategoryW = 9,
  CORE2_DomainRegisterStringA = 10, CORE2_DomainRegisterStringW = 11, CORE2_DomainCreateA = 12,
  CORE2_DomainCreateW = 13, CORE2_DomainDestroy = 14, CORE2_Initialize = 15
};

typedef struct {
  size_t struct_size;
  int (*GetModuleFunctionTable)(int module, nvtx_table *out_table, unsigned int *out_size);
} nvtx_callbacks_table;

enum { NVTX_COLOR_ARGB = 1 };
enum { NVTX_MESSAGE_ASCII = 1, NVTX_MESSAGE_UNICODE = 2, NVTX_MESSAGE_REGISTERED = 3 };

typedef struct { /* nvtxEventAttributes_t, version 3, size 48 */
  uint16_t version;
  uint16_t size;
  uint32_t category;
  int32_t colorType;
  uint32_t color;
  int32_t payloadType;
  int32_t reserved0;
  uint64_t payload;
  int32_t messageType;
  union {
    const char *ascii;
    const wchar_t *unicode;
    const void *registered;
  } message;
} nvtx_attrs;

typedef const void *nvtx_domain;  /* ours: the domain name's string id, 0 = the default domain */
typedef const void *nvtx_string;  /* ours: the string id */
typedef uint64_t nvtx_range_id;
#endif
