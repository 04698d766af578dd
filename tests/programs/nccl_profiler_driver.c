/* Drives di's NCCL profiler plugin as NCCL 2.26+ does, for one rank of a 2-rank job
 * without a GPU: usage `driver PLUGIN.so API_VERSION [ROUNDS]` (API 4, 5 or 6), rank from
 * $RANK; each round loads the plugin, runs one communicator (hash COMM_HASH + round) and
 * closes the library again, as NCCL does when its last communicator is destroyed.
 *
 * Per round, the "user" thread initialises one communicator (shared by both ranks),
 * then enqueues: 3 float32 allreduces of 1000 elements (Ring/Simple, 2 channels), a
 * broadcast of 256 float64 from rank 1, an allgather of 10 int8 (1 channel), and a p2p of
 * 100 float32 (rank 0 sends to rank 1); each is a Coll/P2p event started and stopped
 * around the enqueue (group events only if the plugin asked for them). A "proxy" thread
 * then runs every op's kernel channels in order, as NCCL's proxy thread reports them:
 * KernelCh start (GPU timer), KERNEL_US of work, the KernelChStop state with the GPU timer
 * GPU_NS later, stop; rank 1 starts each op LATE_US late. The p2p also gets a ProxyOp child
 * of this process and one of another process (PXN: the plugin must not read its parent). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "nccl_profiler_api.h"

#define COMM_HASH 0x5eed1234abcdULL
#define KERNEL_US 5000
#define LATE_US 3000
#define GPU_NS 4000
#define NOPS 6

static int version, rank, mask;
static void *ctx;
static di_nccl_profiler_v4 *v4;
static di_nccl_profiler_v5 *v5;
static void *ops[NOPS];
static int channels[NOPS];
static int enqueued;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *start(unsigned type, void *parent, di_nccl_descr_union u) {
  void *h = NULL;
  if (!(mask & (int)type)) return NULL; /* NCCL makes only the events the plugin activated */
  if (version == 4) {
    di_nccl_descr_v4 d = {.type = (uint8_t)type, .parentObj = parent, .rank = rank, .u = u};
    v4->startEvent(ctx, &h, &d);
  } else {
    di_nccl_descr_v5 d = {.type = type, .parentObj = parent, .rank = rank, .u = u};
    v5->startEvent(ctx, &h, &d);
  }
  return h;
}
static void stop(void *h) { if (h) (version == 4 ? v4->stopEvent : v5->stopEvent)(h); }
static void state(void *h, int s, di_nccl_state_args *a) { if (h) (version == 4 ? v4->recordEventState : v5->recordEventState)(h, s, a); }

static void enqueue_coll(const char *func, size_t count, const char *type, int root, int nch) {
  void *group = start(DI_NCCL_PROFILE_GROUP, NULL, (di_nccl_descr_union){0});
  di_nccl_descr_union u = {.coll = {.seqNumber = 0, .func = func, .count = count, .root = root, .datatype = type,
                                    .nChannels = (uint8_t)nch, .nWarps = 16, .algo = "Ring", .proto = "Simple"}};
  void *h = start(DI_NCCL_PROFILE_COLL, group, u);
  usleep(50);
  stop(h); /* enqueued, not done */
  stop(group);
  pthread_mutex_lock(&lock);
  ops[enqueued] = h;
  channels[enqueued++] = nch;
  pthread_mutex_unlock(&lock);
}

static void enqueue_p2p(const char *func, int peer) {
  di_nccl_descr_union u = {.p2p = {.func = func, .datatype = "ncclFloat32", .count = 100, .peer = peer, .nChannels = 1}};
  void *h = start(DI_NCCL_PROFILE_P2P, NULL, u);
  usleep(50);
  stop(h);
  pthread_mutex_lock(&lock);
  ops[enqueued] = h;
  channels[enqueued++] = 1;
  pthread_mutex_unlock(&lock);
}

static void *proxy(void *arg) {
  (void)arg;
  uint64_t gpu = 1700000000000000000ULL;
  for (int i = 0; i < NOPS; i++) {
    void *op;
    for (;;) {
      pthread_mutex_lock(&lock);
      op = i < enqueued ? ops[i] : NULL;
      int ready = i < enqueued;
      pthread_mutex_unlock(&lock);
      if (ready) break;
      usleep(100);
    }
    if (rank == 1) usleep(LATE_US);
    void *ch[4] = {0};
    for (int c = 0; c < channels[i]; c++)
      ch[c] = start(DI_NCCL_PROFILE_KERNEL_CH, op, (di_nccl_descr_union){.kernelCh = {.channelId = (uint8_t)c, .pTimer = gpu}});
    void *proxy_own = NULL, *proxy_foreign = NULL;
    if (i == NOPS - 1) {
      proxy_own = start(DI_NCCL_PROFILE_PROXY_OP, op, (di_nccl_descr_union){.proxyOp = {.pid = getpid(), .channelId = 0, .peer = 1 - rank, .nSteps = 4}});
      proxy_foreign = start(DI_NCCL_PROFILE_PROXY_OP, (void *)0x10, (di_nccl_descr_union){.proxyOp = {.pid = getpid() + 1, .peer = 1 - rank}});
    }
    usleep(KERNEL_US);
    for (int c = 0; c < channels[i]; c++) {
      di_nccl_state_args a = {.kernelCh = {.pTimer = gpu + GPU_NS}};
      state(ch[c], DI_NCCL_STATE_KERNEL_CH_STOP, &a);
      stop(ch[c]);
    }
    stop(proxy_own);
    stop(proxy_foreign);
    gpu += 1000000;
  }
  return NULL;
}

static int job(const char *path, uint64_t hash);

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  version = atoi(argv[2]);
  rank = atoi(getenv("RANK") ? getenv("RANK") : "0");
  int rounds = argc > 3 ? atoi(argv[3]) : 1;
  for (int r = 0; r < rounds; r++) {
    int res = job(argv[1], COMM_HASH + (uint64_t)r);
    if (res) return res;
  }
  printf("rank %d done\n", rank);
  return 0;
}

/* One communicator's life: NCCL loads the plugin, inits it, runs the ops, finalizes it and,
 * with its last communicator gone, closes the library (a later communicator loads it again). */
static int job(const char *path, uint64_t hash) {
  enqueued = 0;
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 3; }
  char sym[32];
  snprintf(sym, sizeof sym, "ncclProfiler_v%d", version);
  void *api = dlsym(lib, sym);
  if (!api) { fprintf(stderr, "no %s\n", sym); return 4; }
  ncclResult_t res;
  if (version == 4) {
    v4 = api;
    res = v4->init(&ctx, &mask, "world", hash, 1, 2, rank, NULL);
  } else {
    v5 = api;
    res = v5->init(&ctx, hash, &mask, "world", 1, 2, rank, NULL);
  }
  if (res != ncclSuccess) return 5;
  printf("mask %d\n", mask);
  pthread_t t;
  pthread_create(&t, NULL, proxy, NULL);
  for (int i = 0; i < 3; i++) enqueue_coll("AllReduce", 1000, "ncclFloat32", 0, 2);
  enqueue_coll("Broadcast", 256, "ncclFloat64", 1, 1);
  enqueue_coll("AllGather", 10, "ncclInt8", 0, 1);
  enqueue_p2p(rank == 0 ? "Send" : "Recv", 1 - rank);
  pthread_join(t, NULL);
  (version == 4 ? v4->finalize : v5->finalize)(ctx);
  dlclose(lib);
  return 0;
}
