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
#define DI_LIB "mpi"
#include <mpi.h>
#include "shard.h"

static int di_rank = -1, di_size = 0;
static MPI_Comm di_sync_comm = MPI_COMM_NULL;
#define DI_SYNC_ROUNDS 64 /* ping-pongs per rank and phase; the fastest is kept */
#define DI_SYNC_NAP_NS 20000 /* a rank waiting for its turn sleeps this long between probes */

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

static inline void req_lock(void) { while (__atomic_exchange_n(&di_req_lock, 1, __ATOMIC_ACQUIRE)) ; }
static inline void req_unlock(void) { __atomic_store_n(&di_req_lock, 0, __ATOMIC_RELEASE); }
static inline uint32_t req_hash(MPI_Request h) { return ((uint32_t)(uintptr_t)h * 2654435761u) >> 16; }

static uint64_t req_add(MPI_Request h, int recv) {
  if (!di_enabled || h == MPI_REQUEST_NULL) return 0;
  uint64_t id = __atomic_add_fetch(&di_req_counter, 1, __ATOMIC_RELAXED);
  req_lock();
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

static inline void call(int op, int64_t t0, MPI_Comm comm, int peer, int tag, int64_t bytes, uint64_t req, int aux) {
  di_rec *r = di_slot();
  if (!r) return;
  *r = (di_rec){0, (uint16_t)op, peer, t0, di_ticks(), bytes, comm_id(comm), tag, aux, req, 0};
  di_commit(r, KIND_CALL);
}

static inline int comm_size(MPI_Comm c) { int n = 0; PMPI_Comm_size(c, &n); return n; }
static inline int comm_rank(MPI_Comm c) { int n = 0; PMPI_Comm_rank(c, &n); return n; }
#define SUM_COUNTS(arr, n) ({ int64_t s_ = 0; if (arr) for (int i_ = 0; i_ < (n); i_++) s_ += (int64_t)(arr)[i_]; s_; })

/* ---- clock synchronisation ---- */
/* Rank 0 ping-pongs with each rank in turn: at least DI_SYNC_ROUNDS rounds, then more
 * until a round trip under DI_SYNC_GOOD_RTT_NS or DI_SYNC_MAX_NS spent on that rank.
 * offset = remote time - midpoint of the fastest round (error <= half its round trip). */
#define DI_SYNC_GOOD_RTT_NS 4000
#define DI_SYNC_MAX_NS 200000000LL
static void clock_sync(int phase) {
  if (!di_enabled || di_sync_comm == MPI_COMM_NULL) return;
  const int tag = 7301;
  PMPI_Barrier(di_sync_comm);
  if (di_rank == 0) {
    for (int p = 1; p < di_size; p++) {
      int64_t best[3] = {0, INT64_MAX, 0}; /* offset, rtt, remote time */
      int64_t began = di_now(), more = 1;
      for (int k = 0; more; k++) {
        int64_t remote, t0 = di_now();
        PMPI_Send(&more, 1, MPI_INT64_T, p, tag, di_sync_comm);
        PMPI_Recv(&remote, 1, MPI_INT64_T, p, tag, di_sync_comm, MPI_STATUS_IGNORE);
        int64_t t1 = di_now();
        if (t1 - t0 < best[1]) { best[0] = remote - (t0 + (t1 - t0) / 2); best[1] = t1 - t0; best[2] = remote; }
        if (k + 1 >= DI_SYNC_ROUNDS && (best[1] <= DI_SYNC_GOOD_RTT_NS || t1 - began > DI_SYNC_MAX_NS)) more = 0;
      }
      PMPI_Send(&more, 1, MPI_INT64_T, p, tag, di_sync_comm);
      PMPI_Send(best, 3, MPI_INT64_T, p, tag, di_sync_comm);
    }
    di_rec *r = di_slot();
    if (r) { int64_t t = di_now(); *r = (di_rec){0, 0, 0, t, t, 0, 0, phase, 0, 0, 0}; di_commit(r, KIND_CLOCK); }
  } else {
    /* sleep until rank 0 comes to this rank, so waiting ranks leave the cores to the pair measuring */
    int ready = 0;
    struct timespec nap = {0, DI_SYNC_NAP_NS};
    while (!ready) {
      PMPI_Iprobe(0, tag, di_sync_comm, &ready, MPI_STATUS_IGNORE);
      if (!ready) nanosleep(&nap, NULL);
    }
    for (;;) {
      int64_t cmd;
      PMPI_Recv(&cmd, 1, MPI_INT64_T, 0, tag, di_sync_comm, MPI_STATUS_IGNORE);
      if (!cmd) break;
      int64_t now = di_now();
      PMPI_Send(&now, 1, MPI_INT64_T, 0, tag, di_sync_comm);
    }
    int64_t best[3];
    PMPI_Recv(best, 3, MPI_INT64_T, 0, tag, di_sync_comm, MPI_STATUS_IGNORE);
    di_rec *r = di_slot();
    if (r) { *r = (di_rec){0, 0, 0, best[2], best[2], best[0], 0, phase, 0, 0, best[1]}; di_commit(r, KIND_CLOCK); }
  }
}

static void after_init(int op, int64_t t0) {
  if (!di_enabled) return;
  PMPI_Comm_rank(MPI_COMM_WORLD, &di_rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &di_size);
  di_write_header("running", di_rank, di_size, "");
  PMPI_Comm_dup(MPI_COMM_WORLD, &di_sync_comm);
  comm_describe(MPI_COMM_WORLD, WORLD_ID, WORLD_ID, op);
  clock_sync(0);
  call(op, t0, MPI_COMM_WORLD, -1, 0, 0, 0, 0);
}

int MPI_Init(int *argc, char ***argv) {
  int64_t t0 = di_ticks();
  int rc = PMPI_Init(argc, argv);
  after_init(OP_MPI_Init, t0);
  return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
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

/* ---- point to point ---- */
#define SEND(NAME, CT)                                                                       \
  int MPI_##NAME(const void *buf, CT count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm) { \
    int64_t t0 = di_ticks();                                                                   \
    int rc = PMPI_##NAME(buf, count, dt, dest, tag, comm);                                   \
    call(OP_MPI_##NAME, t0, comm, dest, tag, (int64_t)count * tsize(dt), 0, 0);              \
    return rc;                                                                               \
  }
SEND(Send, int) SEND(Send_c, MPI_Count) SEND(Ssend, int) SEND(Ssend_c, MPI_Count)
SEND(Bsend, int) SEND(Bsend_c, MPI_Count) SEND(Rsend, int) SEND(Rsend_c, MPI_Count)

#define ISEND(NAME, CT)                                                                       \
  int MPI_##NAME(const void *buf, CT count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm, \
                 MPI_Request *request) {                                                      \
    int64_t t0 = di_ticks();                                                                    \
    int rc = PMPI_##NAME(buf, count, dt, dest, tag, comm, request);                           \
    call(OP_MPI_##NAME, t0, comm, dest, tag, (int64_t)count * tsize(dt), req_add(*request, 0), 1); \
    return rc;                                                                                \
  }
ISEND(Isend, int) ISEND(Isend_c, MPI_Count) ISEND(Issend, int) ISEND(Issend_c, MPI_Count)
ISEND(Ibsend, int) ISEND(Ibsend_c, MPI_Count) ISEND(Irsend, int) ISEND(Irsend_c, MPI_Count)

/* A receive's record: peer/tag/bytes as received (from the status). */
static void recv_call(int op, int64_t t0, MPI_Comm comm, const MPI_Status *st) {
  MPI_Count n = 0;
  PMPI_Get_count_c(st, MPI_BYTE, &n);
  call(op, t0, comm, st->MPI_SOURCE, st->MPI_TAG, (int64_t)n, 0, 0);
}

#define RECV(NAME, CT)                                                                        \
  int MPI_##NAME(void *buf, CT count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,    \
                 MPI_Status *status) {                                                        \
    MPI_Status tmp;                                                                           \
    if (status == MPI_STATUS_IGNORE) status = &tmp;                                           \
    int64_t t0 = di_ticks();                                                                    \
    int rc = PMPI_##NAME(buf, count, dt, source, tag, comm, status);                          \
    recv_call(OP_MPI_##NAME, t0, comm, status);                                               \
    return rc;                                                                                \
  }
RECV(Recv, int) RECV(Recv_c, MPI_Count)

#define IRECV(NAME, CT)                                                                       \
  int MPI_##NAME(void *buf, CT count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,    \
                 MPI_Request *request) {                                                      \
    int64_t t0 = di_ticks();                                                                    \
    int rc = PMPI_##NAME(buf, count, dt, source, tag, comm, request);                         \
    call(OP_MPI_##NAME, t0, comm, source, tag, (int64_t)count * tsize(dt), req_add(*request, 1), 1); \
    return rc;                                                                                \
  }
IRECV(Irecv, int) IRECV(Irecv_c, MPI_Count)

/* Sendrecv: one CALL for the send half (peer = dest) after one REQ_DONE-like record
 * for the receive half, written as a KIND_REQ_DONE with request id 0 and recv = 2. */
static void sendrecv_recv_half(int64_t t, const MPI_Status *st) {
  di_rec *r = di_slot();
  if (!r) return;
  MPI_Count n = 0;
  PMPI_Get_count_c(st, MPI_BYTE, &n);
  *r = (di_rec){0, 0, st->MPI_SOURCE, t, t, (int64_t)n, 0, st->MPI_TAG, 2, 0, 0};
  di_commit(r, KIND_REQ_DONE);
}

#define SENDRECV(NAME, CT)                                                                    \
  int MPI_##NAME(const void *sbuf, CT scount, MPI_Datatype stype, int dest, int stag, void *rbuf, \
                 CT rcount, MPI_Datatype rtype, int source, int rtag, MPI_Comm comm, MPI_Status *status) { \
    MPI_Status tmp;                                                                           \
    if (status == MPI_STATUS_IGNORE) status = &tmp;                                           \
    int64_t t0 = di_ticks();                                                                    \
    int rc = PMPI_##NAME(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag, comm, status); \
    sendrecv_recv_half(di_ticks(), status);                                                     \
    call(OP_MPI_##NAME, t0, comm, dest, stag, (int64_t)scount * tsize(stype), 0, 0);          \
    return rc;                                                                                \
  }
SENDRECV(Sendrecv, int) SENDRECV(Sendrecv_c, MPI_Count)

#define SENDRECV_REPLACE(NAME, CT)                                                            \
  int MPI_##NAME(void *buf, CT count, MPI_Datatype dt, int dest, int stag, int source, int rtag, \
                 MPI_Comm comm, MPI_Status *status) {                                         \
    MPI_Status tmp;                                                                           \
    if (status == MPI_STATUS_IGNORE) status = &tmp;                                           \
    int64_t t0 = di_ticks();                                                                    \
    int rc = PMPI_##NAME(buf, count, dt, dest, stag, source, rtag, comm, status);             \
    sendrecv_recv_half(di_ticks(), status);                                                     \
    call(OP_MPI_##NAME, t0, comm, dest, stag, (int64_t)count * tsize(dt), 0, 0);              \
    return rc;                                                                                \
  }
SENDRECV_REPLACE(Sendrecv_replace, int) SENDRECV_REPLACE(Sendrecv_replace_c, MPI_Count)

/* ---- completion ---- */
#define STACK_REQS 64
int MPI_Wait(MPI_Request *request, MPI_Status *status) {
  MPI_Status tmp;
  if (status == MPI_STATUS_IGNORE) status = &tmp;
  MPI_Request h = *request;
  int64_t t0 = di_ticks();
  int rc = PMPI_Wait(request, status);
  req_done(h, status, di_ticks());
  call(OP_MPI_Wait, t0, MPI_COMM_NULL, -1, 0, 0, 0, 1);
  return rc;
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
  MPI_Status tmp;
  if (status == MPI_STATUS_IGNORE) status = &tmp;
  MPI_Request h = *request;
  int64_t t0 = di_ticks();
  int rc = PMPI_Test(request, flag, status);
  if (*flag) req_done(h, status, di_ticks());
  call(OP_MPI_Test, t0, MPI_COMM_NULL, -1, *flag, 0, 0, 1);
  return rc;
}

/* Copies of the handles (completed ones become MPI_REQUEST_NULL) and statuses. */
typedef struct { MPI_Request hs[STACK_REQS]; MPI_Status ss[STACK_REQS]; MPI_Request *h; MPI_Status *s; } req_copy;
static void copy_reqs(req_copy *c, int n, const MPI_Request *reqs, MPI_Status **statuses) {
  c->h = n <= STACK_REQS ? c->hs : malloc(sizeof(MPI_Request) * (size_t)n);
  c->s = c->ss;
  if (c->h) memcpy(c->h, reqs, sizeof(MPI_Request) * (size_t)(n > 0 ? n : 0));
  if (*statuses == MPI_STATUSES_IGNORE) {
    if (n > STACK_REQS) c->s = malloc(sizeof(MPI_Status) * (size_t)n);
    if (c->s) *statuses = c->s;
  }
}
static void free_reqs(req_copy *c) {
  if (c->h && c->h != c->hs) free(c->h);
  if (c->s && c->s != c->ss) free(c->s);
}

int MPI_Waitall(int count, MPI_Request reqs[], MPI_Status *statuses) {
  req_copy c;
  copy_reqs(&c, count, reqs, &statuses);
  int64_t t0 = di_ticks();
  int rc = PMPI_Waitall(count, reqs, statuses);
  int64_t t = di_ticks();
  if (c.h) for (int i = 0; i < count; i++) req_done(c.h[i], statuses != MPI_STATUSES_IGNORE ? &statuses[i] : NULL, t);
  call(OP_MPI_Waitall, t0, MPI_COMM_NULL, -1, 0, 0, 0, count);
  free_reqs(&c);
  return rc;
}

int MPI_Testall(int count, MPI_Request reqs[], int *flag, MPI_Status *statuses) {
  req_copy c;
  copy_reqs(&c, count, reqs, &statuses);
  int64_t t0 = di_ticks();
  int rc = PMPI_Testall(count, reqs, flag, statuses);
  int64_t t = di_ticks();
  if (*flag && c.h) for (int i = 0; i < count; i++) req_done(c.h[i], statuses != MPI_STATUSES_IGNORE ? &statuses[i] : NULL, t);
  call(OP_MPI_Testall, t0, MPI_COMM_NULL, -1, *flag, 0, 0, count);
  free_reqs(&c);
  return rc;
}

int MPI_Waitany(int count, MPI_Request reqs[], int *index, MPI_Status *status) {
  MPI_Status tmp, *none = MPI_STATUSES_IGNORE;
  if (status == MPI_STATUS_IGNORE) status = &tmp;
  req_copy c;
  copy_reqs(&c, count, reqs, &none);
  int64_t t0 = di_ticks();
  int rc = PMPI_Waitany(count, reqs, index, status);
  if (*index != MPI_UNDEFINED && c.h) req_done(c.h[*index], status, di_ticks());
  call(OP_MPI_Waitany, t0, MPI_COMM_NULL, -1, 1, 0, 0, count);
  free_reqs(&c);
  return rc;
}

int MPI_Testany(int count, MPI_Request reqs[], int *index, int *flag, MPI_Status *status) {
  MPI_Status tmp, *none = MPI_STATUSES_IGNORE;
  if (status == MPI_STATUS_IGNORE) status = &tmp;
  req_copy c;
  copy_reqs(&c, count, reqs, &none);
  int64_t t0 = di_ticks();
  int rc = PMPI_Testany(count, reqs, index, flag, status);
  if (*flag && *index != MPI_UNDEFINED && c.h) req_done(c.h[*index], status, di_ticks());
  call(OP_MPI_Testany, t0, MPI_COMM_NULL, -1, *flag, 0, 0, count);
  free_reqs(&c);
  return rc;
}

#define SOME(NAME)                                                                              \
  int MPI_##NAME(int count, MPI_Request reqs[], int *outcount, int indices[], MPI_Status *statuses) { \
    req_copy c;                                                                                 \
    copy_reqs(&c, count, reqs, &statuses);                                                      \
    int64_t t0 = di_ticks();                                                                      \
    int rc = PMPI_##NAME(count, reqs, outcount, indices, statuses);                             \
    int64_t t = di_ticks();                                                                       \
    if (*outcount != MPI_UNDEFINED && c.h)                                                      \
      for (int i = 0; i < *outcount; i++)                                                       \
        req_done(c.h[indices[i]], statuses != MPI_STATUSES_IGNORE ? &statuses[i] : NULL, t);    \
    call(OP_MPI_##NAME, t0, MPI_COMM_NULL, -1, *outcount, 0, 0, count);                         \
    free_reqs(&c);                                                                              \
    return rc;                                                                                  \
  }
SOME(Waitsome) SOME(Testsome)

int MPI_Request_free(MPI_Request *request) {
  MPI_Request h = *request;
  int64_t t0 = di_ticks();
  int rc = PMPI_Request_free(request);
  req_done(h, NULL, di_ticks()); /* freed before completion: the request is over for di */
  call(OP_MPI_Request_free, t0, MPI_COMM_NULL, -1, 0, 0, 0, 1);
  return rc;
}

/* ---- collectives: peer = root, bytes = this rank's send-side payload ---- */
static inline void coll(int op, int64_t t0, MPI_Comm comm, int root, int64_t bytes, MPI_Request *req) {
  call(op, t0, comm, root, 0, bytes, req ? req_add(*req, 0) : 0, req ? 1 : 0);
}

int MPI_Barrier(MPI_Comm comm) {
  int64_t t0 = di_ticks();
  int rc = PMPI_Barrier(comm);
  coll(OP_MPI_Barrier, t0, comm, -1, 0, NULL);
  return rc;
}
int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request) {
  int64_t t0 = di_ticks();
  int rc = PMPI_Ibarrier(comm, request);
  coll(OP_MPI_Ibarrier, t0, comm, -1, 0, request);
  return rc;
}

/* RQ(x) expands to x for the nonblocking form, to nothing for the blocking one. */
#define RQ_B(...)
#define RQ_I(...) __VA_ARGS__
#define REQ_ARG_B NULL
#define REQ_ARG_I request

#define BCAST(NAME, CT, K)                                                                       \
  int MPI_##NAME(void *buf, CT count, MPI_Datatype dt, int root, MPI_Comm comm RQ_##K(, MPI_Request *request)) { \
    int64_t t0 = di_ticks();                                                                       \
    int rc = PMPI_##NAME(buf, count, dt, root, comm RQ_##K(, request));                          \
    coll(OP_MPI_##NAME, t0, comm, root, (int64_t)count * tsize(dt), REQ_ARG_##K);                \
    return rc;                                                                                   \
  }
BCAST(Bcast, int, B) BCAST(Bcast_c, MPI_Count, B) BCAST(Ibcast, int, I) BCAST(Ibcast_c, MPI_Count, I)

#define REDUCE(NAME, CT, K)                                                                      \
  int MPI_##NAME(const void *sbuf, void *rbuf, CT count, MPI_Datatype dt, MPI_Op o, int root,   \
                 MPI_Comm comm RQ_##K(, MPI_Request *request)) {                                 \
    int64_t t0 = di_ticks();                                                                       \
    int rc = PMPI_##NAME(sbuf, rbuf, count, dt, o, root, comm RQ_##K(, request));                \
    coll(OP_MPI_##NAME, t0, comm, root, (int64_t)count * tsize(dt), REQ_ARG_##K);                \
    return rc;                                                                                   \
  }
REDUCE(Reduce, int, B) REDUCE(Reduce_c, MPI_Count, B) REDUCE(Ireduce, int, I) REDUCE(Ireduce_c, MPI_Count, I)

#define ALLREDUCE(NAME, CT, K)                                                                   \
  int MPI_##NAME(const void *sbuf, void *rbuf, CT count, MPI_Datatype dt, MPI_Op o,             \
                 MPI_Comm comm RQ_##K(, MPI_Request *request)) {                                 \
    int64_t t0 = di_ticks();                                                                       \
    int rc = PMPI_##NAME(sbuf, rbuf, count, dt, o, comm RQ_##K(, request));                      \
    coll(OP_MPI_##NAME, t0, comm, -1, (int64_t)count * tsize(dt), REQ_ARG_##K);                  \
    return rc;                                                                                   \
  }
ALLREDUCE(Allreduce, int, B) ALLREDUCE(Allreduce_c, MPI_Count, B)
ALLREDUCE(Iallreduce, int, I) ALLREDUCE(Iallreduce_c, MPI_Count, I)
ALLREDUCE(Reduce_scatter_block, int, B) ALLREDUCE(Reduce_scatter_block_c, MPI_Count, B)
ALLREDUCE(Ireduce_scatter_block, int, I) ALLREDUCE(Ireduce_scatter_block_c, MPI_Count, I)

#define REDUCE_SCATTER(NAME, CT, K)                                                              \
  int MPI_##NAME(const void *sbuf, void *rbuf, const CT rcounts[], MPI_Datatype dt, MPI_Op o,   \
                 MPI_Comm comm RQ_##K(, MPI_Request *request)) {                                 \
    int64_t t0 = di_ticks();                                                                       \
    int rc = PMPI_##NAME(sbuf, rbuf, rcounts, dt, o, comm RQ_##K(, request));                    \
    coll(OP_MPI_##NAME, t0, comm, -1, SUM_COUNTS(rcounts, comm_size(comm)) * tsize(dt), REQ_ARG_##K); \
    return rc;                                                                                   \
  }
REDUCE_SCATTER(Reduce_scatter, int, B) REDUCE_SCATTER(Reduce_scatter_c, MPI_Count, B)
REDUCE_SCATTER(Ireduce_scatter, int, I) REDUCE_SCATTER(Ireduce_scatter_c, MPI_Count, I)

/* Allgather, Alltoall (no root) and Gather, Scatter (root): bytes = sendcount x type. */
#define ALLTO(NAME, CT, K)                                                                       \
  int MPI_##NAME(const void *sbuf, CT scount, MPI_Datatype stype, void *rbuf, CT rcount,        \
                 MPI_Datatype rtype, MPI_Comm comm RQ_##K(, MPI_Request *request)) {             \
    int64_t t0 = di_ticks();                                                                       \
    int rc = PMPI_##NAME(sbuf, scount, stype, rbuf, rcount, rtype, comm RQ_##K(, request));      \
    coll(OP_MPI_##NAME, t0, comm, -1, sbuf == MPI_IN_PLACE ? (int64_t)rcount * tsize(rtype) : (int64_t)scount * tsize(stype), REQ_ARG_##K); \
    return rc;                                                                                   \
  }
ALLTO(Allgather, int, B) ALLTO(Allgather_c, MPI_Count, B) ALLTO(Iallgather, int, I) ALLTO(Iallgather_c, MPI_Count, I)
ALLTO(Alltoall, int, B) ALLTO(Alltoall_c, MPI_Count, B) ALLTO(Ialltoall, int, I) ALLTO(Ialltoall_c, MPI_Count, I)

#define ROOTED(NAME, CT, K)                                                                      \
  int MPI_##NAME(const void *sbuf, CT scount, MPI_Datatype stype, void *rbuf, CT rcount,        \
                 MPI_Datatype rtype, int root, MPI_Comm comm RQ_##K(, MPI_Request *request)) {   \
    int64_t t0 = di_ticks();                                                                       \
    int rc = PMPI_##NAME(sbuf, scount, stype, rbuf, rcount, rtype, root, comm RQ_##K(, request)); \
    coll(OP_MPI_##NAME, t0, comm, root, sbuf == MPI_IN_PLACE ? (int64_t)rcount * tsize(rtype) : (int64_t)scount * tsize(stype), REQ_ARG_##K); \
    return rc;                                                                                   \
  }
ROOTED(Gather, int, B) ROOTED(Gather_c, MPI_Count, B) ROOTED(Igather, int, I) ROOTED(Igather_c, MPI_Count, I)
ROOTED(Scatter, int, B) ROOTED(Scatter_c, MPI_Count, B) ROOTED(Iscatter, int, I) ROOTED(Iscatter_c, MPI_Count, I)

#define ALLGATHERV(NAME, CT, DT, K)                                                              \
  int MPI_##NAME(const void *sbuf, CT scount, MPI_Datatype stype, void *rbuf, const CT rcounts[], \
                 const DT displs[], MPI_Datatype rtype, MPI_Comm comm RQ_##K(, MPI_Request *request)) { \
    int64_t t0 = di_ticks();                                                                       \
    int rc = PMPI_##NAME(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm RQ_##K(, request)); \
    coll(OP_MPI_##NAME, t0, comm, -1, sbuf == MPI_IN_PLACE ? (int64_t)rcounts[comm_rank(comm)] * tsize(rtype) : (int64_t)scount * tsize(stype), REQ_ARG_##K); \
    return rc;                                                                                   \
  }
ALLGATHERV(Allgatherv, int, int, B) ALLGATHERV(Allgatherv_c, MPI_Count, MPI_Aint, B)
ALLGATHERV(Iallgatherv, int, int, I) ALLGATHERV(Iallgatherv_c, MPI_Count, MPI_Aint, I)

#define GATHERV(NAME, CT, DT, K)                                                                 \
  int MPI_##NAME(const void *sbuf, CT scount, MPI_Datatype stype, void *rbuf, const CT rcounts[], \
                 const DT displs[], MPI_Datatype rtype, int root, MPI_Comm comm RQ_##K(, MPI_Request *request)) { \
    int64_t t0 = di_ticks();                                                                       \
    int rc = PMPI_##NAME(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm RQ_##K(, request)); \
    coll(OP_MPI_##NAME, t0, comm, root, sbuf == MPI_IN_PLACE ? (int64_t)rcounts[root] * tsize(rtype) : (int64_t)scount * tsize(stype), REQ_ARG_##K); \
    return rc;                                                                                   \
  }
GATHERV(Gatherv, int, int, B) GATHERV(Gatherv_c, MPI_Count, MPI_Aint, B)
GATHERV(Igatherv, int, int, I) GATHERV(Igatherv_c, MPI_Count, MPI_Aint, I)

#define SCATTERV(NAME, CT, DT, K)                                                                \
  int MPI_##NAME(const void *sbuf, const CT scounts[], const DT displs[], MPI_Datatype stype,    \
                 void *rbuf, CT rcount, MPI_Datatype rtype, int root, MPI_Comm comm RQ_##K(, MPI_Request *request)) { \
    int64_t t0 = di_ticks();                                                                       \
    int rc = PMPI_##NAME(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm RQ_##K(, request)); \
    int64_t b = comm_rank(comm) == root ? SUM_COUNTS(scounts, comm_size(comm)) * tsize(stype) : (int64_t)rcount * tsize(rtype); \
    coll(OP_MPI_##NAME, t0, comm, root, b, REQ_ARG_##K);                                          \
    return rc;                                                                                   \
  }
SCATTERV(Scatterv, int, int, B) SCATTERV(Scatterv_c, MPI_Count, MPI_Aint, B)
SCATTERV(Iscatterv, int, int, I) SCATTERV(Iscatterv_c, MPI_Count, MPI_Aint, I)

#define ALLTOALLV(NAME, CT, DT, K)                                                               \
  int MPI_##NAME(const void *sbuf, const CT scounts[], const DT sdispls[], MPI_Datatype stype,  \
                 void *rbuf, const CT rcounts[], const DT rdispls[], MPI_Datatype rtype,         \
                 MPI_Comm comm RQ_##K(, MPI_Request *request)) {                                 \
    int64_t t0 = di_ticks();                                                                       \
    int rc = PMPI_##NAME(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm RQ_##K(, request)); \
    int n = comm_size(comm);                                                                     \
    int64_t b = sbuf == MPI_IN_PLACE ? SUM_COUNTS(rcounts, n) * tsize(rtype) : SUM_COUNTS(scounts, n) * tsize(stype); \
    coll(OP_MPI_##NAME, t0, comm, -1, b, REQ_ARG_##K);                                           \
    return rc;                                                                                   \
  }
ALLTOALLV(Alltoallv, int, int, B) ALLTOALLV(Alltoallv_c, MPI_Count, MPI_Aint, B)
ALLTOALLV(Ialltoallv, int, int, I) ALLTOALLV(Ialltoallv_c, MPI_Count, MPI_Aint, I)

/* ---- communicators ---- */
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
  int64_t t0 = di_ticks();
  int rc = PMPI_Comm_split(comm, color, key, newcomm);
  comm_created(comm, newcomm, OP_MPI_Comm_split);
  call(OP_MPI_Comm_split, t0, comm, -1, color, 0, 0, 0);
  return rc;
}
int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *newcomm) {
  int64_t t0 = di_ticks();
  int rc = PMPI_Comm_split_type(comm, type, key, info, newcomm);
  comm_created(comm, newcomm, OP_MPI_Comm_split_type);
  call(OP_MPI_Comm_split_type, t0, comm, -1, type, 0, 0, 0);
  return rc;
}
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
  int64_t t0 = di_ticks();
  int rc = PMPI_Comm_dup(comm, newcomm);
  comm_created(comm, newcomm, OP_MPI_Comm_dup);
  call(OP_MPI_Comm_dup, t0, comm, -1, 0, 0, 0, 0);
  return rc;
}
int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm) {
  int64_t t0 = di_ticks();
  int rc = PMPI_Comm_dup_with_info(comm, info, newcomm);
  comm_created(comm, newcomm, OP_MPI_Comm_dup_with_info);
  call(OP_MPI_Comm_dup_with_info, t0, comm, -1, 0, 0, 0, 0);
  return rc;
}
int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm) {
  int64_t t0 = di_ticks();
  int rc = PMPI_Comm_create(comm, group, newcomm);
  comm_created(comm, newcomm, OP_MPI_Comm_create);
  call(OP_MPI_Comm_create, t0, comm, -1, 0, 0, 0, 0);
  return rc;
}
int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm) {
  int64_t t0 = di_ticks();
  int rc = PMPI_Comm_create_group(comm, group, tag, newcomm);
  comm_created(comm, newcomm, OP_MPI_Comm_create_group);
  call(OP_MPI_Comm_create_group, t0, comm, -1, tag, 0, 0, 0);
  return rc;
}
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
