/* di NCCL shim: LD_PRELOAD fallback for NCCL without a usable profiler plugin API.
 * Wraps the collective and point-to-point calls and the communicator constructors,
 * forwarding to the real ones (pnccl* where NCCL exports them, else the next ncclX),
 * and appends one KIND_CALL record per call to the nccl shard (shard.h):
 *   op (ops.h), t0..t1 (the call: enqueue time, not GPU completion), comm (job-wide
 *   communicator id), peer (root or peer rank in the communicator, -1 none), bytes
 *   (count x datatype size; per-rank contribution for AllGather, result for
 *   ReduceScatter), aux (ncclDataType_t), aux2 (datatype size), tag (count, saturated).
 * A communicator id is agreed by all its members without talking: FNV-1a of the
 * ncclUniqueId for ncclCommInitRank*, of (parent id, color, n-th split) for ncclCommSplit;
 * bit 62 marks NCCL ids. One KIND_COMM record per communicator: peer = my rank,
 * tag = size. Communicators made otherwise get a process-local id (bit 63).
 * When di's NCCL profiler plugin (nccl_profiler.c) is loaded by NCCL in this process it
 * calls di_nccl_shim_standby() at its first init; from then on this shim records only the
 * calls on 1-rank communicators, which NCCL runs without its profiler. */
#define DI_LIB "nccl"
#include <dlfcn.h>
#include "shard.h"
#include <nccl.h>

#define DI_NCCL_BIT (1ULL << 62)
#define DI_UNKNOWN_BIT (1ULL << 63)
#define DI_MAX_COMMS 1024

static struct { ncclComm_t comm; uint64_t id; uint32_t splits; int size; } di_comms[DI_MAX_COMMS];
static int di_ncomms;
static pthread_mutex_t di_comm_lock = PTHREAD_MUTEX_INITIALIZER;
static int di_standby;
/* whether calls on a communicator of `size` ranks are ours to record: on standby only those of
 * 1-rank communicators, which NCCL runs without its profiler (a plain copy) */
#define DI_RECORDS(size) (di_enabled && (!__atomic_load_n(&di_standby, __ATOMIC_RELAXED) || (size) == 1))
#define DI_PATH_SHIM "\"nccl_path\": \"preload_shim\""
#define DI_PATH_STANDBY "\"nccl_path\": \"standby\""

__attribute__((visibility("default"))) void di_nccl_shim_standby(void) {
  if (!__atomic_exchange_n(&di_standby, 1, __ATOMIC_RELAXED)) di_write_header("started", -1, 0, DI_PATH_STANDBY);
}

static void *di_real(const char *name) {
  char p[96];
  snprintf(p, sizeof p, "p%s", name);
  void *f = dlsym(RTLD_NEXT, p);
  return f ? f : dlsym(RTLD_NEXT, name);
}
/* real_NAME: the wrapped function, typed like this shim's own NAME */
#define REAL(name) static __typeof__(name) *real_##name; \
  if (!real_##name) real_##name = (__typeof__(name) *)di_real(#name); \
  if (!real_##name) return ncclSystemError

static int64_t di_type_size(ncclDataType_t t) {
  switch ((int)t) {
    case 0: case 1: case 10: case 11: return 1; /* int8, uint8, fp8 e4m3 / e5m2 */
    case 6: case 9: return 2;                   /* float16, bfloat16 */
    case 2: case 3: case 7: return 4;           /* int32, uint32, float32 */
    case 4: case 5: case 8: return 8;           /* int64, uint64, float64 */
    default: return 1;
  }
}

static uint64_t di_fnv(const void *p, size_t n, uint64_t h) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ULL;
  return h;
}

static void di_comm_add(ncclComm_t comm, uint64_t id, int rank, int size) {
  pthread_mutex_lock(&di_comm_lock);
  if (di_ncomms < DI_MAX_COMMS) di_comms[di_ncomms++] = (typeof(di_comms[0])){comm, id, 0, size};
  pthread_mutex_unlock(&di_comm_lock);
  if (!DI_RECORDS(size)) return;
  di_rec *r = di_slot();
  if (!r) return;
  *r = (di_rec){0, OP_ncclCommInitRank, rank, di_ticks(), 0, 0, id, size, 0, 0, 0};
  r->t1 = r->t0;
  di_commit(r, KIND_COMM);
}

/* A communicator's id (and its size, -1 unknown); a split bumps the parent's split count. */
static uint64_t di_comm_id(ncclComm_t comm, int bump_split, uint32_t *split, int *size) {
  uint64_t id = 0;
  if (size) *size = -1;
  pthread_mutex_lock(&di_comm_lock);
  for (int i = 0; i < di_ncomms; i++)
    if (di_comms[i].comm == comm) {
      id = di_comms[i].id;
      if (split) *split = bump_split ? di_comms[i].splits++ : di_comms[i].splits;
      if (size) *size = di_comms[i].size;
      break;
    }
  pthread_mutex_unlock(&di_comm_lock);
  if (!id) id = DI_UNKNOWN_BIT | ((uint64_t)(uint32_t)di_pid << 32) | ((uintptr_t)comm & 0xFFFFFFFFu);
  return id;
}

static void di_call(int op, int64_t t0, ncclComm_t comm, int peer, size_t count, ncclDataType_t type) {
  int64_t t1 = di_ticks();
  int ranks;
  uint64_t id = di_comm_id(comm, 0, NULL, &ranks);
  if (!DI_RECORDS(ranks)) return;
  di_rec *r = di_slot();
  if (!r) return;
  int64_t size = di_type_size(type);
  *r = (di_rec){0, (uint16_t)op, peer, t0, t1, (int64_t)count * size, id,
                count > 0x7fffffff ? 0x7fffffff : (int32_t)count, (int32_t)type, 0, size};
  di_commit(r, KIND_CALL);
}

static uint64_t di_id_of_unique(const ncclUniqueId *u) {
  return (di_fnv(u->internal, sizeof u->internal, 1469598103934665603ULL) & (DI_NCCL_BIT - 1)) | DI_NCCL_BIT;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId uid, int rank) {
  REAL(ncclCommInitRank);
  ncclResult_t res = real_ncclCommInitRank(comm, nranks, uid, rank);
  if (res == ncclSuccess && di_enabled) di_comm_add(*comm, di_id_of_unique(&uid), rank, nranks);
  return res;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId uid, int rank, ncclConfig_t *config) {
  REAL(ncclCommInitRankConfig);
  ncclResult_t res = real_ncclCommInitRankConfig(comm, nranks, uid, rank, config);
  if ((res == ncclSuccess || res == ncclInProgress) && di_enabled) di_comm_add(*comm, di_id_of_unique(&uid), rank, nranks);
  return res;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config) {
  REAL(ncclCommSplit);
  ncclResult_t res = real_ncclCommSplit(comm, color, key, newcomm, config);
  if ((res == ncclSuccess || res == ncclInProgress) && di_enabled && newcomm && *newcomm) {
    uint32_t n = 0;
    uint64_t parent = di_comm_id(comm, 1, &n, NULL);
    uint64_t parts[3] = {parent, (uint64_t)(int64_t)color, n};
    int rank = -1, size = -1;
    ncclResult_t (*user_rank)(ncclComm_t, int *) = (ncclResult_t(*)(ncclComm_t, int *))di_real("ncclCommUserRank");
    ncclResult_t (*count)(ncclComm_t, int *) = (ncclResult_t(*)(ncclComm_t, int *))di_real("ncclCommCount");
    if (user_rank) user_rank(*newcomm, &rank);
    if (count) count(*newcomm, &size);
    di_comm_add(*newcomm, (di_fnv(parts, sizeof parts, 1469598103934665603ULL) & (DI_NCCL_BIT - 1)) | DI_NCCL_BIT, rank, size);
  }
  return res;
}

#define DI_WRAP(name, opid, peer_expr, count_expr, params, args)                         \
  ncclResult_t name params {                                                           \
    REAL(name);                                                \
    int64_t t0 = di_ticks();                                                           \
    ncclResult_t res = real_##name args;                                               \
    if (di_enabled) di_call(opid, t0, comm, peer_expr, count_expr, datatype);              \
    return res;                                                                        \
  }

DI_WRAP(ncclAllReduce, OP_ncclAllReduce, -1, count,
        (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),
        (sendbuff, recvbuff, count, datatype, op, comm, stream))
DI_WRAP(ncclBroadcast, OP_ncclBroadcast, root, count,
        (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream),
        (sendbuff, recvbuff, count, datatype, root, comm, stream))
DI_WRAP(ncclReduce, OP_ncclReduce, root, count,
        (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream),
        (sendbuff, recvbuff, count, datatype, op, root, comm, stream))
DI_WRAP(ncclAllGather, OP_ncclAllGather, -1, sendcount,
        (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream),
        (sendbuff, recvbuff, sendcount, datatype, comm, stream))
DI_WRAP(ncclReduceScatter, OP_ncclReduceScatter, -1, recvcount,
        (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),
        (sendbuff, recvbuff, recvcount, datatype, op, comm, stream))
DI_WRAP(ncclAlltoAll, OP_ncclAlltoAll, -1, count,
        (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream),
        (sendbuff, recvbuff, count, datatype, comm, stream))
DI_WRAP(ncclSend, OP_ncclSend, peer, count,
        (const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream),
        (sendbuff, count, datatype, peer, comm, stream))
DI_WRAP(ncclRecv, OP_ncclRecv, peer, count,
        (void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream),
        (recvbuff, count, datatype, peer, comm, stream))

static void di_shard_child_reset(void) { di_write_header("started", -1, 0, di_standby ? DI_PATH_STANDBY : DI_PATH_SHIM); }

__attribute__((constructor)) static void di_nccl_start(void) {
  di_shard_init();
  di_write_header("started", -1, 0, DI_PATH_SHIM);
}

__attribute__((destructor)) static void di_nccl_stop(void) {
  di_write_header("exited", -1, 0, di_standby ? DI_PATH_STANDBY : DI_PATH_SHIM);
}
