/* The NCCL profiler plugin ABI that di's plugin (nccl_profiler.c) implements: versions
 * 4, 5 and 6 of the ncclProfiler_vN struct (NCCL 2.26 and later), written from the layout
 * documented in NCCL's ext-profiler/README.md and its versioned headers. NCCL looks up the
 * symbol ncclProfiler_vN, newest first, in the library named by NCCL_PROFILER_PLUGIN.
 *
 * Only the descriptor members di reads are named; all three versions place the union at
 * the same offset (type, parentObj, rank; the union is 8-byte aligned), and v6 only adds
 * copy-engine members to it. Types the wheel's nccl.h defines (ncclResult_t) come from it. */
#ifndef DI_NCCL_PROFILER_API_H
#define DI_NCCL_PROFILER_API_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <nccl.h>

/* event type bits (the activation mask) */
enum {
  DI_NCCL_PROFILE_GROUP = 1 << 0,
  DI_NCCL_PROFILE_COLL = 1 << 1,       /* a collective: start/stop around its enqueue */
  DI_NCCL_PROFILE_P2P = 1 << 2,        /* a send or receive, likewise */
  DI_NCCL_PROFILE_PROXY_OP = 1 << 3,   /* a proxy thread's network work for one channel of an op */
  DI_NCCL_PROFILE_PROXY_STEP = 1 << 4,
  DI_NCCL_PROFILE_PROXY_CTRL = 1 << 5,
  DI_NCCL_PROFILE_KERNEL_CH = 1 << 6,  /* the kernel working on one channel of an op */
  DI_NCCL_PROFILE_NET_PLUGIN = 1 << 7,
};

/* event state: the kernel channel stopped (its state args carry the GPU timer) */
#define DI_NCCL_STATE_KERNEL_CH_STOP 22

typedef void (*di_nccl_logger_t)(int level, unsigned long flags, const char *file, int line, const char *fmt, ...);

/* The union members di reads; identical in v4, v5 and v6 (v5 and v6 append parentGroup
 * to coll and p2p, after the members below). */
typedef union {
  struct {
    uint64_t seqNumber;      /* n-th collective on the communicator */
    const char *func;        /* "AllReduce", "Broadcast", ... */
    const void *sendBuff;
    void *recvBuff;
    size_t count;            /* elements (per rank: sendcount of AllGather, recvcount of ReduceScatter) */
    int root;
    const char *datatype;    /* "ncclFloat32", ... */
    uint8_t nChannels;
    uint8_t nWarps;
    const char *algo;        /* "Ring", "Tree", ... */
    const char *proto;       /* "Simple", "LL", "LL128" */
  } coll;
  struct {
    const char *func;        /* "Send" or "Recv" */
    void *buff;
    const char *datatype;
    size_t count;
    int peer;                /* communicator rank */
    uint8_t nChannels;
  } p2p;
  struct {
    pid_t pid;               /* process that made the op: the parent is ours only when it is our pid (PXN) */
    uint8_t channelId;
    int peer;
    int nSteps;
    int chunkSize;
    int isSend;
  } proxyOp;
  struct {
    uint8_t channelId;
    uint64_t pTimer;         /* GPU global timer at the channel's start, ns */
  } kernelCh;
  uint64_t reserve[16];      /* the real unions are larger: never copied, only read through */
} di_nccl_descr_union;

typedef struct {
  uint8_t type;
  void *parentObj;           /* the plugin's handle of the parent event */
  int rank;                  /* communicator rank that made the event */
  di_nccl_descr_union u;
} di_nccl_descr_v4;

typedef struct {
  uint64_t type;
  void *parentObj;
  int rank;
  di_nccl_descr_union u;
} di_nccl_descr_v5; /* v6 has this layout too */

typedef union {
  struct { size_t transSize; } proxyStep;
  struct { int appendedProxyOps; } proxyCtrl;
  struct { void *data; } netPlugin;
  struct { uint64_t pTimer; } kernelCh; /* GPU global timer at the channel's stop, ns */
} di_nccl_state_args;

typedef struct {
  const char *name;
  ncclResult_t (*init)(void **context, int *eActivationMask, const char *commName, uint64_t commHash,
                       int nNodes, int nranks, int rank, di_nccl_logger_t logfn);
  ncclResult_t (*startEvent)(void *context, void **eHandle, di_nccl_descr_v4 *eDescr);
  ncclResult_t (*stopEvent)(void *eHandle);
  ncclResult_t (*recordEventState)(void *eHandle, int eState, di_nccl_state_args *eStateArgs);
  ncclResult_t (*finalize)(void *context);
} di_nccl_profiler_v4;

typedef struct {
  const char *name;
  ncclResult_t (*init)(void **context, uint64_t commId, int *eActivationMask, const char *commName,
                       int nNodes, int nranks, int rank, di_nccl_logger_t logfn);
  ncclResult_t (*startEvent)(void *context, void **eHandle, di_nccl_descr_v5 *eDescr);
  ncclResult_t (*stopEvent)(void *eHandle);
  ncclResult_t (*recordEventState)(void *eHandle, int eState, di_nccl_state_args *eStateArgs);
  ncclResult_t (*finalize)(void *context);
} di_nccl_profiler_v5; /* v6: the same functions */

_Static_assert(offsetof(di_nccl_descr_v4, u) == 24 && offsetof(di_nccl_descr_v5, u) == 24, "descriptor union at byte 24");
#endif
