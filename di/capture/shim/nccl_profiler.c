/* di NCCL profiler plugin: loaded by NCCL 2.26+ through NCCL_PROFILER_PLUGIN=<this .so>;
 * exports ncclProfiler_v6, _v5 and _v4 (nccl_profiler_api.h). Writes the nccl_plugin
 * shard (shard.h), in the record layout of the LD_PRELOAD shim (nccl.c) plus work records:
 *
 *   KIND_COMM  at init, per communicator: comm (job-wide id from NCCL's commHash, bit 62),
 *              peer = my rank in it, tag = its size.
 *   KIND_CALL  when a collective or p2p event stops (NCCL has enqueued it): op (ops.h),
 *              t0..t1 = start..stop of the enqueue, comm, peer (root of rooted collectives,
 *              peer of p2p, else -1), bytes = count x datatype size, tag = count
 *              (saturated), aux = ncclDataType_t, req = this op's id in the process (from 1),
 *              aux2 = datatype size | algorithm string id << 16 | protocol string id << 32
 *              | channels << 48.
 *   KIND_NCCL_WORK when a kernel-channel or proxy-op child of that op stops: req = the
 *              op's id, op and comm as the op's, t0..t1 = when NCCL reported the child's
 *              start and stop (the op's completion is the last child's stop), peer =
 *              channel, tag = 0 kernel channel / 1 proxy op, aux = proxy peer or -1,
 *              bytes = GPU-timer duration of a kernel channel in ns (-1 unknown),
 *              aux2 = GPU timer at its start (ns).
 *
 * Event handles come from a ring of slots that is never freed, so a child that starts after
 * its op stopped (the kernel runs after the enqueue) still finds its parent; a slot is
 * reused only DI_SLOTS events later. The library pins itself (RTLD_NODELETE): NCCL unloads
 * its plugin with the last communicator. When di's LD_PRELOAD shim is in the same process, the
 * plugin tells it to stand by (di_nccl_shim_standby), so each call is recorded once. */
#define DI_LIB "nccl_plugin"
#include "shard.h" /* first: it defines _GNU_SOURCE (dladdr) */
#include <dlfcn.h>
#include <limits.h>
#include "nccl_profiler_api.h"

#define DI_NCCL_BIT (1ULL << 62)
#define DI_SLOTS (1u << 18)
#define DI_MASK (DI_NCCL_PROFILE_COLL | DI_NCCL_PROFILE_P2P | DI_NCCL_PROFILE_KERNEL_CH | DI_NCCL_PROFILE_PROXY_OP)

typedef struct { uint64_t comm; int rank, nranks; } di_ctx;

typedef struct di_ev {
  uint8_t type;       /* DI_NCCL_PROFILE_* */
  uint16_t op;
  uint8_t channel;
  int32_t peer, dtype, aux;
  int64_t t0, count, size, gpu0, gpu1;
  uint64_t comm, req, aux2;
} di_ev;

static di_ev *di_ring;
static uint32_t di_next_slot;
static uint64_t di_next_req;
static int di_api = 0;
static pthread_mutex_t di_init_lock = PTHREAD_MUTEX_INITIALIZER;

static di_ev *di_new_event(void) {
  if (!di_ring) return NULL;
  di_ev *e = &di_ring[__atomic_fetch_add(&di_next_slot, 1, __ATOMIC_RELAXED) & (DI_SLOTS - 1)];
  memset(e, 0, sizeof *e);
  return e;
}

static const struct { const char *name; int op; } di_funcs[] = {
  {"AllReduce", OP_ncclAllReduce}, {"Broadcast", OP_ncclBroadcast}, {"Reduce", OP_ncclReduce},
  {"AllGather", OP_ncclAllGather}, {"ReduceScatter", OP_ncclReduceScatter}, {"AllToAll", OP_ncclAlltoAll},
  {"AlltoAll", OP_ncclAlltoAll}, {"Send", OP_ncclSend}, {"Recv", OP_ncclRecv}, {"Gather", OP_ncclGather},
  {"Scatter", OP_ncclScatter}, {NULL, 0}};

static int di_op_of(const char *func) {
  for (int i = 0; func && di_funcs[i].name; i++)
    if (strcmp(func, di_funcs[i].name) == 0) return di_funcs[i].op;
  return OP_ncclCollective;
}

static const struct { const char *name; int id, size; } di_types[] = {
  {"ncclInt8", 0, 1}, {"ncclUint8", 1, 1}, {"ncclInt32", 2, 4}, {"ncclUint32", 3, 4}, {"ncclInt64", 4, 8},
  {"ncclUint64", 5, 8}, {"ncclFloat16", 6, 2}, {"ncclFloat32", 7, 4}, {"ncclFloat64", 8, 8},
  {"ncclBfloat16", 9, 2}, {"ncclFloat8e4m3", 10, 1}, {"ncclFloat8e5m2", 11, 1}, {NULL, -1, 1}};

static void di_type_of(const char *name, di_ev *e) {
  int i = 0;
  while (name && di_types[i].name && strcmp(name, di_types[i].name) != 0) i++;
  if (!name) while (di_types[i].name) i++;
  e->dtype = di_types[i].id;
  e->size = di_types[i].size;
}

static uint64_t di_small_string(const char *s) { uint32_t id = s ? di_intern(s) : 0; return id < 0xFFFF ? id : 0; }

static ncclResult_t di_init(void **context, int *mask, uint64_t hash, int nranks, int rank) {
  pthread_mutex_lock(&di_init_lock);
  if (!di_ring) di_ring = calloc(DI_SLOTS, sizeof *di_ring); /* zero pages until touched */
  pthread_mutex_unlock(&di_init_lock);
  di_ctx *c = calloc(1, sizeof *c);
  if (!c || !di_ring) { free(c); return ncclSystemError; } /* NCCL then runs without the plugin */
  c->comm = (hash & (DI_NCCL_BIT - 1)) | DI_NCCL_BIT;
  c->rank = rank;
  c->nranks = nranks;
  *context = c;
  *mask = DI_MASK;
  void (*standby)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "di_nccl_shim_standby");
  if (standby) standby();
  char extra[96];
  snprintf(extra, sizeof extra, "\"nccl_path\": \"profiler_plugin\", \"profiler_api\": %d", di_api);
  di_write_header("running", -1, 0, extra);
  di_rec *r = di_slot();
  if (r) {
    *r = (di_rec){0, OP_ncclCommInitRank, rank, di_ticks(), 0, 0, c->comm, nranks, 0, 0, 0};
    r->t1 = r->t0;
    di_commit(r, KIND_COMM);
  }
  return ncclSuccess;
}

static ncclResult_t di_init_v4(void **context, int *mask, const char *name, uint64_t hash, int nnodes, int nranks,
                               int rank, di_nccl_logger_t log) {
  (void)name; (void)nnodes; (void)log;
  if (!di_api) di_api = 4;
  return di_init(context, mask, hash, nranks, rank);
}

static ncclResult_t di_init_v5(void **context, uint64_t id, int *mask, const char *name, int nnodes, int nranks,
                               int rank, di_nccl_logger_t log) {
  (void)name; (void)nnodes; (void)log;
  return di_init(context, mask, id, nranks, rank);
}
static ncclResult_t di_init_v6(void **context, uint64_t id, int *mask, const char *name, int nnodes, int nranks,
                               int rank, di_nccl_logger_t log) {
  if (!di_api) di_api = 6;
  return di_init_v5(context, id, mask, name, nnodes, nranks, rank, log);
}
static ncclResult_t di_init_v5_only(void **context, uint64_t id, int *mask, const char *name, int nnodes, int nranks,
                                    int rank, di_nccl_logger_t log) {
  if (!di_api) di_api = 5;
  return di_init_v5(context, id, mask, name, nnodes, nranks, rank, log);
}

/* The parent op of a child event, or NULL when it is not ours to read (another process's, PXN). */
static di_ev *di_parent(void *parent) {
  di_ev *p = parent;
  if (!p || p < di_ring || p >= di_ring + DI_SLOTS) return NULL;
  return (p->type == DI_NCCL_PROFILE_COLL || p->type == DI_NCCL_PROFILE_P2P) ? p : NULL;
}

static ncclResult_t di_start(void *context, void **handle, unsigned type, void *parentObj, const di_nccl_descr_union *u) {
  *handle = NULL;
  di_ctx *c = context;
  if (!di_enabled || !c) return ncclSuccess;
  if (type == DI_NCCL_PROFILE_COLL || type == DI_NCCL_PROFILE_P2P) {
    di_ev *e = di_new_event();
    if (!e) return ncclSuccess;
    int coll = type == DI_NCCL_PROFILE_COLL;
    e->type = (uint8_t)type;
    e->op = (uint16_t)di_op_of(coll ? u->coll.func : u->p2p.func);
    e->comm = c->comm;
    e->count = (int64_t)(coll ? u->coll.count : u->p2p.count);
    di_type_of(coll ? u->coll.datatype : u->p2p.datatype, e);
    int rooted = e->op == OP_ncclBroadcast || e->op == OP_ncclReduce || e->op == OP_ncclGather || e->op == OP_ncclScatter;
    e->peer = coll ? (rooted ? u->coll.root : -1) : u->p2p.peer;
    uint64_t channels = coll ? u->coll.nChannels : u->p2p.nChannels;
    e->aux2 = (uint64_t)e->size | di_small_string(coll ? u->coll.algo : NULL) << 16
              | di_small_string(coll ? u->coll.proto : NULL) << 32 | channels << 48;
    e->req = __atomic_add_fetch(&di_next_req, 1, __ATOMIC_RELAXED);
    e->t0 = di_ticks();
    *handle = e;
  } else if (type == DI_NCCL_PROFILE_KERNEL_CH || type == DI_NCCL_PROFILE_PROXY_OP) {
    if (type == DI_NCCL_PROFILE_PROXY_OP && u->proxyOp.pid != di_pid) return ncclSuccess;
    di_ev *p = di_parent(parentObj);
    if (!p) return ncclSuccess;
    di_ev *e = di_new_event();
    if (!e) return ncclSuccess;
    e->type = (uint8_t)type;
    e->op = p->op;
    e->comm = p->comm;
    e->req = p->req;
    e->channel = type == DI_NCCL_PROFILE_KERNEL_CH ? u->kernelCh.channelId : u->proxyOp.channelId;
    e->aux = type == DI_NCCL_PROFILE_PROXY_OP ? u->proxyOp.peer : -1;
    e->gpu0 = type == DI_NCCL_PROFILE_KERNEL_CH ? (int64_t)u->kernelCh.pTimer : 0;
    e->t0 = di_ticks();
    *handle = e;
  }
  return ncclSuccess;
}

static ncclResult_t di_start_v4(void *context, void **handle, di_nccl_descr_v4 *d) {
  return di_start(context, handle, d->type, d->parentObj, &d->u);
}
static ncclResult_t di_start_v5(void *context, void **handle, di_nccl_descr_v5 *d) {
  return di_start(context, handle, (unsigned)d->type, d->parentObj, &d->u);
}

static ncclResult_t di_stop(void *handle) {
  di_ev *e = handle;
  if (!e || !di_enabled) return ncclSuccess;
  di_rec *r = di_slot();
  if (!r) return ncclSuccess;
  int64_t t1 = di_ticks();
  if (e->type == DI_NCCL_PROFILE_COLL || e->type == DI_NCCL_PROFILE_P2P) {
    *r = (di_rec){0, e->op, e->peer, e->t0, t1, e->count * e->size, e->comm,
                  e->count > INT_MAX ? INT_MAX : (int32_t)e->count, e->dtype, e->req, (int64_t)e->aux2};
    di_commit(r, KIND_CALL);
  } else {
    int64_t gpu_ns = e->gpu0 && e->gpu1 >= e->gpu0 ? e->gpu1 - e->gpu0 : -1;
    *r = (di_rec){0, e->op, e->channel, e->t0, t1, gpu_ns, e->comm, e->type == DI_NCCL_PROFILE_PROXY_OP, e->aux,
                  e->req, e->gpu0};
    di_commit(r, KIND_NCCL_WORK);
  }
  return ncclSuccess;
}

static ncclResult_t di_state(void *handle, int state, di_nccl_state_args *args) {
  di_ev *e = handle;
  if (e && args && state == DI_NCCL_STATE_KERNEL_CH_STOP && e->type == DI_NCCL_PROFILE_KERNEL_CH)
    e->gpu1 = (int64_t)args->kernelCh.pTimer;
  return ncclSuccess;
}

static ncclResult_t di_finalize(void *context) {
  free(context);
  return ncclSuccess;
}

__attribute__((visibility("default"))) di_nccl_profiler_v5 ncclProfiler_v6 = {"di", di_init_v6, di_start_v5, di_stop, di_state, di_finalize};
__attribute__((visibility("default"))) di_nccl_profiler_v5 ncclProfiler_v5 = {"di", di_init_v5_only, di_start_v5, di_stop, di_state, di_finalize};
__attribute__((visibility("default"))) di_nccl_profiler_v4 ncclProfiler_v4 = {"di", di_init_v4, di_start_v4, di_stop, di_state, di_finalize};

static void di_shard_child_reset(void) { di_write_header("started", -1, 0, "\"nccl_path\": \"profiler_plugin\""); }

__attribute__((constructor)) static void di_plugin_start(void) {
  /* NCCL closes the plugin when its last communicator goes; a later one would load it
   * afresh and truncate this process's shard files: keep it loaded instead */
  Dl_info self;
  if (dladdr((void *)di_plugin_start, &self) && self.dli_fname) dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  di_shard_init();
  di_write_header("started", -1, 0, "\"nccl_path\": \"profiler_plugin\"");
}

__attribute__((destructor)) static void di_plugin_stop(void) {
  char extra[96];
  snprintf(extra, sizeof extra, "\"nccl_path\": \"profiler_plugin\", \"profiler_api\": %d", di_api);
  di_write_header("exited", -1, 0, extra);
}
