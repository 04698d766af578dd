/* A stand-in NCCL library for tests on machines without a GPU: the symbols the di
 * NCCL shim wraps, with NCCL's signatures (from nccl.h); each call takes ~0.2 ms
 * and succeeds. A communicator is a small struct holding rank, size and hash.
 *
 * Like NCCL 2.26+, it loads the profiler plugin named by $NCCL_PROFILER_PLUGIN
 * (ncclProfiler_v5) at the first communicator, inits it per communicator (the hash:
 * FNV-1a of the unique id, or of the parent's hash and the split color), and around each
 * collective or p2p call on a communicator of 2+ ranks starts and stops its Coll/P2p
 * event, then reports one kernel channel; a 1-rank communicator's calls bypass the
 * profiler, as NCCL's one-rank path does. */
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>
#include "nccl_profiler_api.h"

struct ncclComm { int rank, size; uint64_t hash; void *profiler; };

static di_nccl_profiler_v5 *plugin;
static int mask;

static uint64_t fnv(const void *p, size_t n, uint64_t h) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ULL;
  return h;
}

static ncclComm_t make(int rank, int size, uint64_t hash) {
  ncclComm_t c = calloc(1, sizeof *c);
  c->rank = rank;
  c->size = size;
  c->hash = hash;
  const char *path = getenv("NCCL_PROFILER_PLUGIN");
  if (!plugin && path && *path) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    plugin = lib ? dlsym(lib, "ncclProfiler_v5") : NULL;
  }
  if (plugin && plugin->init(&c->profiler, hash, &mask, "standin", 1, size, rank, NULL) != ncclSuccess) c->profiler = NULL;
  return c;
}

static const char *type_name(ncclDataType_t t) {
  static const char *names[] = {"ncclInt8", "ncclUint8", "ncclInt32", "ncclUint32", "ncclInt64", "ncclUint64",
                                "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16"};
  return (int)t >= 0 && (int)t < 10 ? names[t] : "ncclFloat8e4m3";
}

/* The profiler events of one call: the op around its enqueue, then one kernel channel. */
static void profile(ncclComm_t c, unsigned type, const char *func, size_t n, ncclDataType_t t, int root_or_peer) {
  if (!c->profiler || c->size == 1 || !(mask & (int)type)) return;
  di_nccl_descr_v5 d = {.type = type, .rank = c->rank};
  if (type == DI_NCCL_PROFILE_COLL)
    d.u.coll = (typeof(d.u.coll)){.func = func, .count = n, .root = root_or_peer, .datatype = type_name(t), .nChannels = 1,
                                  .algo = "Ring", .proto = "Simple"};
  else
    d.u.p2p = (typeof(d.u.p2p)){.func = func, .datatype = type_name(t), .count = n, .peer = root_or_peer, .nChannels = 1};
  void *op = NULL, *ch = NULL;
  plugin->startEvent(c->profiler, &op, &d);
  plugin->stopEvent(op);
  if (!op || !(mask & DI_NCCL_PROFILE_KERNEL_CH)) return;
  di_nccl_descr_v5 k = {.type = DI_NCCL_PROFILE_KERNEL_CH, .parentObj = op, .rank = c->rank, .u.kernelCh = {.pTimer = 1000}};
  plugin->startEvent(c->profiler, &ch, &k);
  usleep(100);
  di_nccl_state_args a = {.kernelCh = {.pTimer = 2000}};
  plugin->recordEventState(ch, DI_NCCL_STATE_KERNEL_CH_STOP, &a);
  plugin->stopEvent(ch);
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  *comm = make(rank, nranks, fnv(id.internal, sizeof id.internal, 1469598103934665603ULL));
  return ncclSuccess;
}
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config) {
  (void)config;
  uint64_t parts[2] = {comm->hash, (uint64_t)color};
  *newcomm = make(key, comm->size, fnv(parts, sizeof parts, 1469598103934665603ULL));
  return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) { *rank = comm->rank; return ncclSuccess; }
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) { *count = comm->size; return ncclSuccess; }
#define WORK usleep(200)
#define COLL(func, n, t, root) profile(c, DI_NCCL_PROFILE_COLL, func, n, t, root)
ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t o, ncclComm_t c, cudaStream_t st) {
  (void)s; (void)r; (void)o; (void)st; WORK; COLL("AllReduce", n, t, 0); return ncclSuccess;
}
ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st) {
  (void)s; (void)r; (void)st; WORK; COLL("Broadcast", n, t, root); return ncclSuccess;
}
ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st) {
  (void)s; (void)r; (void)st; WORK; COLL("AllGather", n, t, 0); return ncclSuccess;
}
ncclResult_t ncclSend(const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st) {
  (void)s; (void)st; WORK; profile(c, DI_NCCL_PROFILE_P2P, "Send", n, t, peer); return ncclSuccess;
}
ncclResult_t ncclRecv(void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st) {
  (void)r; (void)st; WORK; profile(c, DI_NCCL_PROFILE_P2P, "Recv", n, t, peer); return ncclSuccess;
}
