/* di NVTX injection library: NVTX ranges, marks and di's own regions into di capture
 * shards (see shard.h), on any machine (no CUDA needed).
 *
 * `di record` sets NVTX_INJECTION64_PATH to this library for every process of the job:
 * NVTX (the v3 headers compiled into a program or a Python extension such as the `nvtx`
 * package or PyTorch, and NVTX v2's libnvToolsExt) loads it at the first NVTX call and
 * calls InitializeInjectionNvtx2, which stores the functions below into NVTX's tables
 * (nvtx_abi.h).  Recorded (kind KIND_USER, `op` = enum di_user_op):
 *   push/pop ranges       one USER_PUSH record at the pop: t0 at the push, t1 at the pop
 *                         (a per-thread stack holds the open ones; pops pair per domain);
 *   start/end ranges      USER_START on the starting thread (with the attributes) and
 *                         USER_END on the ending one, paired by range id at ingest;
 *   marks                 USER_MARK (t0 == t1);
 *   category/thread names USER_CATEGORY, USER_THREAD;
 *   di.region             di_region_push/di_region_pop: USER_REGION, like push/pop;
 *   Python calls          di_py_call (di record --python): USER_PYCALL, times already
 *                         CLOCK_MONOTONIC ns (Python's time.monotonic_ns()).
 * Fields: comm = message string id, aux2 = domain string id (0: the default domain;
 * USER_PYCALL: file string id), tag = category (USER_PYCALL: line), aux = ARGB colour,
 * peer = colour type (1: ARGB), req = range id (start/end), bytes = payload (0 none).
 * Domain and registered-string handles are string ids of this process.  Ranges still
 * open at a normal exit are written with the exit time as their end and req = 1
 * ("unclosed"). */
#define DI_LIB "nvtx"
#define DI_TLS_MODEL "global-dynamic" /* loaded by dlopen (NVTX, ctypes): no static TLS left to take */
#include "shard.h"
#include "nvtx_abi.h"

enum di_user_op { USER_PUSH = 1, USER_START = 2, USER_END = 3, USER_MARK = 4, USER_REGION = 5, USER_PYCALL = 6,
                  USER_CATEGORY = 7, USER_THREAD = 8 };
#define DI_STACK 256           /* open push/pop ranges kept per thread; deeper ones are counted only */
#define DI_REGION_DOMAIN (~0ULL) /* stack entries of di.region */

typedef struct {
  int64_t t0;
  uint64_t domain;
  uint32_t msg, category, color;
  int32_t color_type;
  int64_t payload;
} di_open_range;
static __thread di_open_range di_stack[DI_STACK]; /* dynamic TLS: too big for the static surplus of a dlopened library */
static __thread int di_depth;
static uint64_t di_next_range = 1;

static inline void di_user_rec(uint16_t op, int64_t t0, int64_t t1, uint64_t domain, uint32_t msg, uint32_t category,
                               uint32_t color, int32_t color_type, uint64_t req, int64_t payload) {
  di_rec *r = di_slot();
  if (!r) return;
  *r = (di_rec){0, op, color_type, t0, t1, payload, msg, (int32_t)category, (int32_t)color, req, (int64_t)domain};
  di_commit(r, KIND_USER);
}

/* A wide string narrowed to ASCII ('?' for the rest), interned. */
static uint32_t di_intern_wide(const wchar_t *w) {
  if (!w) return 0;
  char buf[1024];
  size_t n = 0;
  for (; w[n] && n < sizeof buf - 1; n++) buf[n] = (w[n] > 0 && w[n] < 128) ? (char)w[n] : '?';
  return di_intern_len(buf, n);
}

static uint32_t di_message(const nvtx_attrs *a) {
  if (!a) return 0;
  switch (a->messageType) {
    case NVTX_MESSAGE_ASCII: return di_intern(a->message.ascii);
    case NVTX_MESSAGE_UNICODE: return di_intern_wide(a->message.unicode);
    case NVTX_MESSAGE_REGISTERED: return (uint32_t)(uintptr_t)a->message.registered;
    default: return 0;
  }
}

/* ---- push/pop ---- */
static inline int di_push(uint64_t domain, uint32_t msg, const nvtx_attrs *a) {
  int d = di_depth++;
  if (d < DI_STACK) {
    di_open_range *o = &di_stack[d];
    o->domain = domain;
    o->msg = msg;
    o->category = a ? a->category : 0;
    o->color = a ? a->color : 0;
    o->color_type = a ? a->colorType : 0;
    o->payload = a && a->payloadType ? (int64_t)a->payload : 0;
    o->t0 = di_ticks();
  }
  return d;
}

static inline int di_pop(uint64_t domain) {
  int64_t t1 = di_ticks();
  int d = di_depth - 1;
  if (d < 0) return -1;
  if (d >= DI_STACK) { di_depth--; return d; }
  int k = d;
  while (k >= 0 && di_stack[k].domain != domain) k--; /* pops pair within a domain */
  if (k < 0) return -1;
  di_open_range o = di_stack[k];
  if (k != d) memmove(&di_stack[k], &di_stack[k + 1], (size_t)(d - k) * sizeof o);
  di_depth--;
  di_user_rec(domain == DI_REGION_DOMAIN ? USER_REGION : USER_PUSH, o.t0, t1, domain == DI_REGION_DOMAIN ? 0 : domain,
              o.msg, o.category, o.color, o.color_type, 0, o.payload);
  return k;
}

static int nvtxRangePushA_(const char *m) { return di_push(0, di_intern(m), NULL); }
static int nvtxRangePushW_(const wchar_t *m) { return di_push(0, di_intern_wide(m), NULL); }
static int nvtxRangePushEx_(const nvtx_attrs *a) { return di_push(0, di_message(a), a); }
static int nvtxRangePop_(void) { return di_pop(0); }
static int nvtxDomainRangePushEx_(nvtx_domain d, const nvtx_attrs *a) { return di_push((uintptr_t)d, di_message(a), a); }
static int nvtxDomainRangePop_(nvtx_domain d) { return di_pop((uintptr_t)d); }

/* ---- start/end ---- */
static nvtx_range_id di_start(uint64_t domain, uint32_t msg, const nvtx_attrs *a) {
  nvtx_range_id id = __atomic_fetch_add(&di_next_range, 1, __ATOMIC_RELAXED);
  int64_t t = di_ticks();
  di_user_rec(USER_START, t, t, domain, msg, a ? a->category : 0, a ? a->color : 0, a ? a->colorType : 0, id,
              a && a->payloadType ? (int64_t)a->payload : 0);
  return id;
}
static void di_end(nvtx_range_id id) {
  int64_t t = di_ticks();
  di_user_rec(USER_END, t, t, 0, 0, 0, 0, 0, id, 0);
}
static nvtx_range_id nvtxRangeStartA_(const char *m) { return di_start(0, di_intern(m), NULL); }
static nvtx_range_id nvtxRangeStartW_(const wchar_t *m) { return di_start(0, di_intern_wide(m), NULL); }
static nvtx_range_id nvtxRangeStartEx_(const nvtx_attrs *a) { return di_start(0, di_message(a), a); }
static void nvtxRangeEnd_(nvtx_range_id id) { di_end(id); }
static nvtx_range_id nvtxDomainRangeStartEx_(nvtx_domain d, const nvtx_attrs *a) { return di_start((uintptr_t)d, di_message(a), a); }
static void nvtxDomainRangeEnd_(nvtx_domain d, nvtx_range_id id) { (void)d; di_end(id); }

/* ---- marks ---- */
static void di_mark(uint64_t domain, uint32_t msg, const nvtx_attrs *a) {
  int64_t t = di_ticks();
  di_user_rec(USER_MARK, t, t, domain, msg, a ? a->category : 0, a ? a->color : 0, a ? a->colorType : 0, 0,
              a && a->payloadType ? (int64_t)a->payload : 0);
}
static void nvtxMarkA_(const char *m) { di_mark(0, di_intern(m), NULL); }
static void nvtxMarkW_(const wchar_t *m) { di_mark(0, di_intern_wide(m), NULL); }
static void nvtxMarkEx_(const nvtx_attrs *a) { di_mark(0, di_message(a), a); }
static void nvtxDomainMarkEx_(nvtx_domain d, const nvtx_attrs *a) { di_mark((uintptr_t)d, di_message(a), a); }

/* ---- names: domains, registered strings, categories, threads ---- */
static nvtx_domain nvtxDomainCreateA_(const char *name) { return (nvtx_domain)(uintptr_t)di_intern(name); }
static nvtx_domain nvtxDomainCreateW_(const wchar_t *name) { return (nvtx_domain)(uintptr_t)di_intern_wide(name); }
static void nvtxDomainDestroy_(nvtx_domain d) { (void)d; }
static nvtx_string nvtxDomainRegisterStringA_(nvtx_domain d, const char *s) { (void)d; return (nvtx_string)(uintptr_t)di_intern(s); }
static nvtx_string nvtxDomainRegisterStringW_(nvtx_domain d, const wchar_t *s) { (void)d; return (nvtx_string)(uintptr_t)di_intern_wide(s); }
static void di_name_category(uint64_t domain, uint32_t category, uint32_t name) {
  int64_t t = di_ticks();
  di_user_rec(USER_CATEGORY, t, t, domain, name, category, 0, 0, 0, 0);
}
static void nvtxNameCategoryA_(uint32_t c, const char *n) { di_name_category(0, c, di_intern(n)); }
static void nvtxNameCategoryW_(uint32_t c, const wchar_t *n) { di_name_category(0, c, di_intern_wide(n)); }
static void nvtxDomainNameCategoryA_(nvtx_domain d, uint32_t c, const char *n) { di_name_category((uintptr_t)d, c, di_intern(n)); }
static void nvtxDomainNameCategoryW_(nvtx_domain d, uint32_t c, const wchar_t *n) { di_name_category((uintptr_t)d, c, di_intern_wide(n)); }
static void di_name_thread(uint32_t tid, uint32_t name) {
  int64_t t = di_ticks();
  di_user_rec(USER_THREAD, t, t, 0, name, 0, 0, (int32_t)tid, 0, 0);
}
static void nvtxNameOsThreadA_(uint32_t tid, const char *n) { di_name_thread(tid, di_intern(n)); }
static void nvtxNameOsThreadW_(uint32_t tid, const wchar_t *n) { di_name_thread(tid, di_intern_wide(n)); }
static void nvtxInitialize_(const void *reserved) { (void)reserved; }

/* ---- di's own entry points (di.region and di record --python, through ctypes) ---- */
__attribute__((visibility("default"))) int di_nvtx_enabled(void) { return di_enabled; }
__attribute__((visibility("default"))) uint32_t di_intern_name(const char *s) { return di_intern(s); }
__attribute__((visibility("default"))) int di_region_push(uint32_t name) { return di_push(DI_REGION_DOMAIN, name, NULL); }
__attribute__((visibility("default"))) int di_region_pop(void) { return di_pop(DI_REGION_DOMAIN); }
__attribute__((visibility("default"))) void di_py_call(uint32_t name, uint32_t file, int32_t line, int64_t t0_ns, int64_t t1_ns) {
  int64_t off = di_test_offset_ns; /* the same test hook as di_now() */
  di_user_rec(USER_PYCALL, t0_ns + off, t1_ns + off, file, name, (uint32_t)line, 0, 0, 0, 0);
}

/* ---- NVTX's entry point ---- */
static void di_fill(nvtx_table table, unsigned size, unsigned id, nvtx_fn fn) {
  if (id < size && table[id]) *table[id] = fn;
}

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(nvtx_get_export_table get) {
  if (!di_enabled || !get) return 0; /* 0: NVTX turns its calls into no-ops */
  const nvtx_callbacks_table *cb = get(NVTX_ETID_CALLBACKS);
  if (!cb || cb->struct_size < sizeof *cb || !cb->GetModuleFunctionTable) return 0;
  nvtx_table t = NULL;
  unsigned n = 0;
  if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &n) || !t) return 0;
#define F(id, fn) di_fill(t, n, id, (nvtx_fn)(fn))
  F(CORE_MarkEx, nvtxMarkEx_); F(CORE_MarkA, nvtxMarkA_); F(CORE_MarkW, nvtxMarkW_);
  F(CORE_RangeStartEx, nvtxRangeStartEx_); F(CORE_RangeStartA, nvtxRangeStartA_); F(CORE_RangeStartW, nvtxRangeStartW_);
  F(CORE_RangeEnd, nvtxRangeEnd_); F(CORE_RangePushEx, nvtxRangePushEx_); F(CORE_RangePushA, nvtxRangePushA_);
  F(CORE_RangePushW, nvtxRangePushW_); F(CORE_RangePop, nvtxRangePop_); F(CORE_NameCategoryA, nvtxNameCategoryA_);
  F(CORE_NameCategoryW, nvtxNameCategoryW_); F(CORE_NameOsThreadA, nvtxNameOsThreadA_); F(CORE_NameOsThreadW, nvtxNameOsThreadW_);
  t = NULL;
  n = 0;
  if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n) && t) {
    F(CORE2_DomainMarkEx, nvtxDomainMarkEx_); F(CORE2_DomainRangeStartEx, nvtxDomainRangeStartEx_);
    F(CORE2_DomainRangeEnd, nvtxDomainRangeEnd_); F(CORE2_DomainRangePushEx, nvtxDomainRangePushEx_);
    F(CORE2_DomainRangePop, nvtxDomainRangePop_); F(CORE2_DomainNameCategoryA, nvtxDomainNameCategoryA_);
    F(CORE2_DomainNameCategoryW, nvtxDomainNameCategoryW_); F(CORE2_DomainRegisterStringA, nvtxDomainRegisterStringA_);
    F(CORE2_DomainRegisterStringW, nvtxDomainRegisterStringW_); F(CORE2_DomainCreateA, nvtxDomainCreateA_);
    F(CORE2_DomainCreateW, nvtxDomainCreateW_); F(CORE2_DomainDestroy, nvtxDomainDestroy_);
    F(CORE2_Initialize, nvtxInitialize_);
  }
#undef F
  return 1;
}

static void di_shard_child_reset(void) {
  di_depth = 0; /* the forked thread's open ranges belong to the parent */
  di_write_header("started", -1, 0, "");
}

__attribute__((constructor)) static void di_nvtx_start(void) {
  di_shard_init();
  di_write_header("started", -1, 0, "");
}

/* A normal exit: the main thread's ranges still open end now (req = 1 marks them). */
__attribute__((destructor)) static void di_nvtx_stop(void) {
  if (!di_enabled) return;
  int64_t t1 = di_ticks();
  for (int k = (di_depth < DI_STACK ? di_depth : DI_STACK) - 1; k >= 0; k--) {
    di_open_range *o = &di_stack[k];
    int region = o->domain == DI_REGION_DOMAIN;
    di_user_rec(region ? USER_REGION : USER_PUSH, o->t0, t1, region ? 0 : o->domain, o->msg, o->category, o->color,
                o->color_type, 1, o->payload);
  }
  di_depth = 0;
  di_write_header("exited", -1, 0, "");
}
