/* di PMPI shim: records MPI calls into di capture shards (see shard.h).
 *
 * Loaded with LD_PRELOAD into an MPI program; built by di/capture/build.py with the
 * job's own mpicc.  Every wrapper calls the PMPI_ entry point and appends one
 * KIND_CALL record; nonblocking operations get a request id at post time and a
 * KIND_REQ_DONE record when a Wait/Test completes them (wildcard source and tag
 * resolved from MPI_Status).  Communicators get a job-wide id at creation (the id
 * of the new communicator's rank 0, broadcast to its members) and a KIND_COMM
 * record naming their member world ranks.  Both count forms are wrapped: the
 * classic int ones and MPI-4's large-count _c ones that mpi4py 4 calls. */
#define _GNU_SOURCE /* before any header: dl_iterate_phdr */
#define DI_LIB "mpi"
#include <mpi.h>
#include "shard.h"
#include <dlfcn.h>
#include <link.h>

static int di_rank = -1, di_size = 0;
static MPI_Comm di_sync_comm = MPI_COMM_NULL;
#define DI_SYNC_ROUNDS 64 /* ping-pongs per rank and phase; the fastest is kept */
#define DI_SYNC_NAP_NS 100000 /* a rank waiting for its turn sleeps this long between probes */

/* ---- communicators: handle -> job-wide id ---- */
#define COMM_SLOTS 4096
typedef struct { MPI_Comm h; uint64_t id; int used; } comm_slot;
static comm_slot di_comms[COMM_SLOTS];
static pthread_mutex_t di_comm_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t di_comm_counter;
#define WORLD_ID 0ULL
#define UNKNOWN_BIT (1ULL << 63)
#define NONE_ID (~0ULL) /* MPI_COMM_NULL: calls on no communicator */

static inline uint32_t comm_hash(MPI_Comm c) { return ((uint32_t)(uintptr_t)c * 2654435761u) >> 20; }

static inline uint64_t comm_id(MPI_Comm c) {
  if (c == MPI_COMM_WORLD) return WORLD_ID;
  if (c == MPI_COMM_NULL) return NONE_ID;
  for (uint32_t i = comm_hash(c), k = 0; k < COMM_SLOTS; i = (i + 1) % COMM_SLOTS, k++) {
    if (!__atomic_load_n(&di_comms[i].used, __ATOMIC_ACQUIRE)) break;
    if (di_comms[i].used == 1 && di_comms[i].h == c) return di_comms[i].id;
  }
  /* not created through a wrapped call (MPI_COMM_SELF, Cart_create...): local id */
  return UNKNOWN_BIT | ((uint64_t)(uint32_t)di_rank << 32) | (uint32_t)(uintptr_t)c;
}

static void comm_put(MPI_Comm c, uint64_t id) {
  pthread_mutex_lock(&di_comm_lock);
  for (uint32_t i = comm_hash(c), k = 0; k < COMM_SLOTS; i = (i + 1) % COMM_SLOTS, k++) {
    if (di_comms[i].used != 1 || di_comms[i].h == c) { /* free, tombstone or same handle */
      di_comms[i].h = c;
      di_comms[i].id = id;
      __atomic_store_n(&di_comms[i].used, 1, __ATOMIC_RELEASE);
      break;
    }
  }
  pthread_mutex_unlock(&di_comm_lock);
}

static void comm_drop(MPI_Comm c) {
  pthread_mutex_lock(&di_comm_lock);
  for (uint32_t i = comm_hash(c), k = 0; k < COMM_SLOTS; i = (i + 1) % COMM_SLOTS, k++) {
    if (!di_comms[i].used) break;
    if (di_comms[i].used == 1 && di_comms[i].h == c) { di_comms[i].used = 2; break; }
  }
  pthread_mutex_unlock(&di_comm_lock);
}

/* Record communicator c (members as world ranks) and remember its id. */
static void comm_describe(MPI_Comm c, uint64_t id, uint64_t parent, int op) {
  int size, me;
  PMPI_Comm_size(c, &size);
  PMPI_Comm_rank(c, &me);
  MPI_Group g, wg;
  PMPI_Comm_group(c, &g);
  PMPI_Comm_group(MPI_COMM_WORLD, &wg);
  int *in = malloc(sizeof(int) * 2 * (size_t)size);
  char *text = malloc((size_t)size * 12 + 1);
  uint32_t sid = 0;
  if (in && text) {
    for (int i = 0; i < size; i++) in[i] = i;
    PMPI_Group_translate_ranks(g, size, in, wg, in + size);
    size_t len = 0;
    for (int i = 0; i < size; i++) len += (size_t)sprintf(text + len, i ? ",%d" : "%d", in[size + i]);
    sid = di_intern_len(text, len);
  }
  free(in);
  free(text);
  PMPI_Group_free(&g);
  PMPI_Group_free(&wg);
  di_rec *r = di_slot();
  if (r) {
    *r = (di_rec){0, (uint16_t)op, me, di_ticks(), 0, 0, id, size, 0, parent, (int64_t)sid};
    r->t1 = r->t0;
    di_commit(r, KIND_COMM);
  }
}

/* After a collective creation call: agree on an id and record the new communicator. */
static void comm_created(MPI_Comm parent, MPI_Comm *newcomm, int op) {
  if (!di_enabled || !newcomm || *newcomm == MPI_COMM_NULL) return;
  int inter = 0;
  PMPI_Comm_test_inter(*newcomm, &inter);
  if (inter) return; /* intercommunicators keep a local id: their messages stay unmatched */
  uint64_t id = ((uint64_t)(uint32_t)(di_rank + 1) << 32) | __atomic_add_fetch(&di_comm_counter, 1, __ATOMIC_RELAXED);
  PMPI_Bcast(&id, 1, MPI_UINT64_T, 0, *newcomm);
  comm_put(*newcomm, id);
  comm_describe(*newcomm, id, comm_id(parent), op);
}

/* ---- requests: handle -> request id ---- */
#define REQ_SLOTS 65536
typedef struct { MPI_Request h; uint32_t recv; uint64_t id; } req_slot;
static req_slot di_reqs[REQ_SLOTS];
static volatile int di_req_lock;
static uint64_t di_req_counter;
static int di_threaded = 1; /* MPI_THREAD_MULTIPLE (or not yet known): the table takes a lock */

/* Only under MPI_THREAD_MULTIPLE can two threads be inside MPI at once; otherwise
 * MPI's own rules serialize the wrappers and the table needs no atomics. */
static inline void req_lock(void) {
  if (di_threaded) while (__atomic_exchange_n(&di_req_lock, 1, __ATOMIC_ACQUIRE)) ;
}
static inline void req_unlock(void) { if (di_threaded) __atomic_store_n(&di_req_lock, 0, __ATOMIC_RELEASE); }
static inline uint32_t req_hash(MPI_Request h) { return ((uint32_t)(uintptr_t)h * 2654435761u) >> 16; }

static uint64_t req_add(MPI_Request h, int recv) {
  if (!di_enabled || h == MPI_REQUEST_NULL) return 0;
  req_lock();
  uint64_t id = ++di_req_counter;
  for (uint32_t i = req_hash(h), k = 0; k < 64; i = (i + 1) & (REQ_SLOTS - 1), k++) {
    if (!di_reqs[i].id || di_reqs[i].h == h) { di_reqs[i] = (req_slot){h, (uint32_t)recv, id}; break; }
  }
  req_unlock();
  return id;
}

/* Remove h; returns its id (0 when unknown) and whether it is a receive. */
static uint64_t req_take(MPI_Request h, int *recv) {
  uint64_t id = 0;
  req_lock();
  for (uint32_t i = req_hash(h), k = 0; k < 64; i = (i + 1) & (REQ_SLOTS - 1), k++) {
    if (di_reqs[i].id && di_reqs[i].h == h) {
      id = di_reqs[i].id;
      *recv = (int)di_reqs[i].recv;
      di_reqs[i].id = 0; /* probe window of 64: a hole is harmless */
      break;
    }
  }
  req_unlock();
  return id;
}

static void req_done(MPI_Request h, const MPI_Status *st, int64_t t) {
  if (!di_enabled || h == MPI_REQUEST_NULL) return;
  int recv = 0;
  uint64_t id = req_take(h, &recv);
  if (!id) return;
  di_rec *r = di_slot();
  if (!r) return;
  int src = -1, tag = -1;
  MPI_Count n = -1;
  if (recv && st) {
    src = st->MPI_SOURCE;
    tag = st->MPI_TAG;
    PMPI_Get_count_c(st, MPI_BYTE, &n);
  }
  *r = (di_rec){0, 0, src, t, t, (int64_t)n, 0, tag, recv, id, 0};
  di_commit(r, KIND_REQ_DONE);
}

/* ---- call records ---- */
static inline int64_t tsize(MPI_Datatype t) {
  int s = 0;
  if (t == MPI_DATATYPE_NULL) return 0;
  PMPI_Type_size(t, &s);
  return s;
}

/* A CALL record from t0 to t1 (ticks) on the communicator with job-wide id cid. */
static inline void call_on(int op, int64_t t0, int64_t t1, uint64_t cid, int peer, int tag, int64_t bytes, uint64_t req, int aux) {
  di_rec *r = di_slot();
  if (!r) return;
  *r = (di_rec){0, (uint16_t)op, peer, t0, t1, bytes, cid, tag, aux, req, 0};
  di_commit(r, KIND_CALL);
}

/* A CALL record from t0 to t1 (ticks). */
static inline void call_until(int op, int64_t t0, int64_t t1, MPI_Comm comm, int peer, int tag, int64_t bytes, uint64_t req, int aux) {
  call_on(op, t0, t1, comm_id(comm), peer, tag, bytes, req, aux);
}

/* A CALL record from t0 to now. */
static inline void call(int op, int64_t t0, MPI_Comm comm, int peer, int tag, int64_t bytes, uint64_t req, int aux) {
  call_until(op, t0, di_ticks(), comm, peer, tag, bytes, req, aux);
}

static inline int comm_size(MPI_Comm c) { int n = 0; PMPI_Comm_size(c, &n); return n; }
static inline int comm_rank(MPI_Comm c) { int n = 0; PMPI_Comm_rank(c, &n); return n; }
#define SUM_COUNTS(arr, n) ({ int64_t s_ = 0; if (arr) for (int i_ = 0; i_ < (n); i_++) s_ += (int64_t)(arr)[i_]; s_; })

/* ---- clock synchronisation ---- */
/* Rank 0 ping-pongs with each rank in turn: at least DI_SYNC_ROUNDS rounds, then more
 * until DI_SYNC_STALE_ROUNDS rounds bring nothing faster AND the fastest round trip is
 * good (<= DI_SYNC_GOOD_RTT_NS, or within half again of the fastest any earlier rank of
 * this phase reached: the network's floor), at most di_sync_max_ns per rank (20 ms,
 * or $DI_CAPTURE_SYNC_MAX_MS).  On a loaded machine a rank often shares a core with
 * rank 0 for a while, and round trips then take a context switch; waiting for a good
 * round beats taking the best of a bad stretch, within that budget (the rtt kept is
 * in the trace's meta.json, an upper bound of twice the error).  offset = remote time - midpoint of the fastest round (error <= half its
 * round trip). */
#define DI_SYNC_STALE_ROUNDS 64
#define DI_SYNC_GOOD_RTT_NS 10000
static int64_t di_sync_max_ns = 20000000LL; /* per rank and phase; DI_CAPTURE_SYNC_MAX_MS */
/* Finalize's sync must never hang a job that is being stopped: a Ctrl-C reaches ranks in
 * different places, and those in MPI_Finalize would wait here forever for the ones left in
 * a collective. So phase 1 waits with a deadline (DI_SYNC_FINALIZE_WAIT_NS after it began)
 * and gives up at once when di record has noted a SIGINT/SIGTERM ($DI_CAPTURE_DIR/stopping,
 * looked for every DI_SYNC_LOOK_NS); given up, the phase writes no CLOCK record (ingest
 * then has the offsets of MPI_Init only). Phase 0 (MPI_Init) waits as MPI_Init itself. */
#define DI_SYNC_FINALIZE_WAIT_NS 300000000000LL /* 5 min: ranks may reach MPI_Finalize far apart */
#define DI_SYNC_LOOK_NS 10000000LL
static int64_t di_sync_deadline; /* 0: wait without limit (phase 0) */
static int64_t di_sync_next_look;
static int di_sync_given_up;

static int sync_give_up(void) {
  if (di_sync_given_up) return 1;
  if (!di_sync_deadline) return 0;
  int64_t now = di_now();
  if (now > di_sync_deadline) return di_sync_given_up = 1;
  if (now >= di_sync_next_look) {
    di_sync_next_look = now + DI_SYNC_LOOK_NS;
    char path[sizeof di_dir + 16];
    snprintf(path, sizeof path, "%s/stopping", di_dir);
    if (syscall(SYS_faccessat, AT_FDCWD, path, F_OK, 0) == 0) return di_sync_given_up = 1;
  }
  return 0;
}

/* Sleep until a message from rank 0 with this tag is there (MPI's own waits spin);
 * 0 when given up. */
static int nap_until_message(int tag) {
  int ready = 0;
  struct timespec nap = {0, DI_SYNC_NAP_NS};
  for (;;) {
    PMPI_Iprobe(0, tag, di_sync_comm, &ready, MPI_STATUS_IGNORE);
    if (ready) return 1;
    if (sync_give_up()) return 0;
    nanosleep(&nap, NULL);
  }
}

/* A receive of the sync; in phase 1 it spins on a request and is cancelled when given up (0). */
static int sync_recv(int64_t *buf, int n, int src, int tag) {
  if (!di_sync_deadline) return PMPI_Recv(buf, n, MPI_INT64_T, src, tag, di_sync_comm, MPI_STATUS_IGNORE), 1;
  MPI_Request req;
  PMPI_Irecv(buf, n, MPI_INT64_T, src, tag, di_sync_comm, &req);
  for (unsigned k = 1;; k++) {
    int done = 0;
    PMPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) return 1;
    if ((k & 255) == 0 && sync_give_up()) {
      PMPI_Cancel(&req);
      PMPI_Request_free(&req);
      return 0;
    }
  }
}

/* Phase 0: a barrier. Phase 1: a non-blocking one, napping until it completes or is
 * given up (then left pending: a collective's request cannot be cancelled). */
static int sync_barrier(void) {
  if (!di_sync_deadline) return PMPI_Barrier(di_sync_comm), 1;
  MPI_Request req;
  PMPI_Ibarrier(di_sync_comm, &req);
  struct timespec nap = {0, DI_SYNC_NAP_NS};
  for (;;) {
    int done = 0;
    PMPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) return 1;
    if (sync_give_up()) return 0;
    nanosleep(&nap, NULL);
  }
}

/* Ranks sleep while the others are measured, before their turn (so that waiting ranks
 * leave the cores to the pair measuring) and after it, until rank 0 releases them all
 * (measured ranks would otherwise spin in their next MPI call). */
static void clock_sync(int phase) {
  if (!di_enabled || di_sync_comm == MPI_COMM_NULL) return;
  const int tag = 7301, release = 7302;
  di_sync_deadline = phase ? di_now() + DI_SYNC_FINALIZE_WAIT_NS : 0;
  if (!sync_barrier()) return;
  if (di_rank == 0) {
    int64_t floor = INT64_MAX; /* fastest round trip of the ranks measured so far */
    for (int p = 1; p < di_size; p++) {
      int64_t best[3] = {0, INT64_MAX, 0}; /* offset, rtt, remote time */
      int64_t began = di_now(), more = 1, stale = 0;
      for (int k = 0; more; k++) {
        int64_t remote, t0 = di_now();
        PMPI_Send(&more, 1, MPI_INT64_T, p, tag, di_sync_comm);
        if (!sync_recv(&remote, 1, p, tag)) return;
        int64_t t1 = di_now();
        stale++;
        if (t1 - t0 < best[1]) { best[0] = remote - (t0 + (t1 - t0) / 2); best[1] = t1 - t0; best[2] = remote; stale = 0; }
        int good = best[1] <= DI_SYNC_GOOD_RTT_NS || (floor != INT64_MAX && best[1] <= floor + floor / 2);
        if ((k + 1 >= DI_SYNC_ROUNDS && stale >= DI_SYNC_STALE_ROUNDS && good) || t1 - began > di_sync_max_ns) more = 0;
      }
      if (best[1] < floor) floor = best[1];
      PMPI_Send(&more, 1, MPI_INT64_T, p, tag, di_sync_comm);
      PMPI_Send(best, 3, MPI_INT64_T, p, tag, di_sync_comm);
    }
    int64_t go = 1;
    for (int p = 1; p < di_size; p++) PMPI_Send(&go, 1, MPI_INT64_T, p, release, di_sync_comm);
    di_rec *r = di_slot();
    if (r) { int64_t t = di_now(); *r = (di_rec){0, 0, 0, t, t, 0, 0, phase, 0, 0, 0}; di_commit(r, KIND_CLOCK); }
  } else {
    if (!nap_until_message(tag)) return;
    for (;;) {
      int64_t cmd;
      if (!sync_recv(&cmd, 1, 0, tag)) return;
      if (!cmd) break;
      int64_t now = di_now();
      PMPI_Send(&now, 1, MPI_INT64_T, 0, tag, di_sync_comm);
    }
    int64_t best[3], go;
    if (!sync_recv(best, 3, 0, tag) || !nap_until_message(release) || !sync_recv(&go, 1, 0, release)) return;
    di_rec *r = di_slot();
    if (r) { *r = (di_rec){0, 0, 0, best[2], best[2], best[0], 0, phase, 0, 0, best[1]}; di_commit(r, KIND_CLOCK); }
  }
}

static void after_init(int op, int64_t t0) {
  if (!di_enabled) return;
  int level = MPI_THREAD_MULTIPLE;
  PMPI_Query_thread(&level);
  di_threaded = level == MPI_THREAD_MULTIPLE;
  const char *budget = getenv("DI_CAPTURE_SYNC_MAX_MS");
  if (budget && atof(budget) > 0) di_sync_max_ns = (int64_t)(atof(budget) * 1e6);
  PMPI_Comm_rank(MPI_COMM_WORLD, &di_rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &di_size);
  di_write_header("running", di_rank, di_size, "");
  PMPI_Comm_dup(MPI_COMM_WORLD, &di_sync_comm);
  comm_describe(MPI_COMM_WORLD, WORLD_ID, WORLD_ID, op);
  clock_sync(0);
  call(op, t0, MPI_COMM_WORLD, -1, 0, 0, 0, 0);
}

/* ---- binding to the MPI library ----
 * With an MPICH-family MPI the shim is linked without libmpi (di/capture/build.py), so
 * that processes which never load MPI (the launcher, shells, tools) do not load it either
 * (tens of ms each).  Its PMPI_ calls then bind at first use to the MPI library in the
 * global scope; one loaded RTLD_LOCAL (Python extension modules such as mpi4py's) is
 * made global here, before the first PMPI_ call, which is MPI_Init's. */
#define DI_MAX_LIBS 512
static int di_list_lib(struct dl_phdr_info *info, size_t size, void *names) {
  (void)size;
  const char **list = names;
  int n = 0;
  while (n < DI_MAX_LIBS - 1 && list[n]) n++;
  if (info->dlpi_name && *info->dlpi_name && n < DI_MAX_LIBS - 1) list[n] = info->dlpi_name;
  return 0;
}

static void expose_mpi(void) {
  static int done;
  if (done) return;
  done = 1;
  static const char *names[DI_MAX_LIBS];
  dl_iterate_phdr(di_list_lib, names); /* dlopen after the walk: never under its lock */
  for (int i = 0; names[i]; i++) {
    void *h = dlopen(names[i], RTLD_LAZY | RTLD_NOLOAD);
    if (!h) continue;
    int has_pmpi = dlsym(h, "PMPI_Init_thread") != NULL;
    if (has_pmpi) dlopen(names[i], RTLD_LAZY | RTLD_NOLOAD | RTLD_GLOBAL);
    dlclose(h);
    if (has_pmpi) return;
  }
}

int MPI_Init(int *argc, char ***argv) {
  expose_mpi();
  int64_t t0 = di_ticks();
  int rc = PMPI_Init(argc, argv);
  after_init(OP_MPI_Init, t0);
  return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  expose_mpi();
  int64_t t0 = di_ticks();
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  after_init(OP_MPI_Init_thread, t0);
  return rc;
}

int MPI_Finalize(void) {
  int64_t t0 = di_ticks();
  clock_sync(1);
  if (di_sync_comm != MPI_COMM_NULL) PMPI_Comm_free(&di_sync_comm);
  call(OP_MPI_Finalize, t0, MPI_COMM_WORLD, -1, 0, 0, 0, 0);
  di_write_header("finalized", di_rank, di_size, "");
  return PMPI_Finalize();
}

#include "pmpi_p2p.h"
#include "pmpi_collectives.h"

/* ---- communicators: tag = the color, split type or tag argument (0 for the others) ---- */
#define COMM_CREATE(NAME, PARAMS, ARGS, TAG)                \
  int MPI_##NAME PARAMS {                                   \
    int64_t t0 = di_ticks();                                \
    int rc = PMPI_##NAME ARGS;                              \
    comm_created(comm, newcomm, OP_MPI_##NAME);             \
    call(OP_MPI_##NAME, t0, comm, -1, TAG, 0, 0, 0);        \
    return rc;                                              \
  }
COMM_CREATE(Comm_split, (MPI_Comm comm, int color, int key, MPI_Comm *newcomm), (comm, color, key, newcomm), color)
COMM_CREATE(Comm_split_type, (MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *newcomm),
            (comm, type, key, info, newcomm), type)
COMM_CREATE(Comm_dup, (MPI_Comm comm, MPI_Comm *newcomm), (comm, newcomm), 0)
COMM_CREATE(Comm_dup_with_info, (MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm), (comm, info, newcomm), 0)
COMM_CREATE(Comm_create, (MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm), (comm, group, newcomm), 0)
COMM_CREATE(Comm_create_group, (MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm),
            (comm, group, tag, newcomm), tag)

int MPI_Comm_free(MPI_Comm *comm) {
  int64_t t0 = di_ticks();
  MPI_Comm c = *comm;
  uint64_t id = comm_id(c);
  int rc = PMPI_Comm_free(comm);
  comm_drop(c);
  di_rec *r = di_slot();
  if (r) { *r = (di_rec){0, OP_MPI_Comm_free, -1, t0, di_ticks(), 0, id, 0, 0, 0, 0}; di_commit(r, KIND_CALL); }
  return rc;
}

static void di_shard_child_reset(void) { di_rank = -1; /* a forked child is not the rank */ }

__attribute__((constructor)) static void di_pmpi_start(void) {
  di_shard_init(); /* the header is written at MPI_Init: processes without MPI leave no files */
}

__attribute__((destructor)) static void di_pmpi_stop(void) {
  if (di_enabled && di_rank >= 0) di_write_header("exited", di_rank, di_size, "");
}
