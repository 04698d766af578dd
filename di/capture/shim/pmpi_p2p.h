/* Point-to-point and completion wrappers of the PMPI shim, included once by pmpi.c
 * (they use its static helpers): sends, receives, Sendrecv, Wait/Test families. */
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

/* ---- probes and matched receives (mpi4py's comm.recv: MPI_Mprobe + MPI_Mrecv) ----
 * A message handle from Mprobe/Improbe remembers its communicator's id until the
 * Mrecv/Imrecv that takes it; a probe's record has the status's source, tag and bytes. */
#define MSG_SLOTS 1024
typedef struct { MPI_Message h; uint64_t comm; int used; } msg_slot;
static msg_slot di_msgs[MSG_SLOTS];
static inline uint32_t msg_hash(MPI_Message h) { return ((uint32_t)(uintptr_t)h * 2654435761u) >> 22; }

static void msg_put(MPI_Message h, uint64_t cid) {
  if (!di_enabled || h == MPI_MESSAGE_NULL || h == MPI_MESSAGE_NO_PROC) return;
  req_lock();
  for (uint32_t i = msg_hash(h), k = 0; k < 64; i = (i + 1) & (MSG_SLOTS - 1), k++)
    if (!di_msgs[i].used || di_msgs[i].h == h) { di_msgs[i] = (msg_slot){h, cid, 1}; break; }
  req_unlock();
}

static uint64_t msg_take(MPI_Message h) {
  uint64_t cid = NONE_ID;
  req_lock();
  for (uint32_t i = msg_hash(h), k = 0; k < 64; i = (i + 1) & (MSG_SLOTS - 1), k++)
    if (di_msgs[i].used && di_msgs[i].h == h) { cid = di_msgs[i].comm; di_msgs[i].used = 0; break; }
  req_unlock();
  return cid;
}

/* After a probe: when it found a message, the status's source, tag and bytes (and the
 * message handle remembered); else the source and tag it asked for. */
static void probed(int op, int64_t t0, MPI_Comm comm, int found, int source, int tag, const MPI_Status *st,
                   const MPI_Message *message) {
  if (!found) {
    call(op, t0, comm, source, tag, 0, 0, 0);
    return;
  }
  if (message) msg_put(*message, comm_id(comm));
  recv_call(op, t0, comm, st);
}

#define PROBE(NAME, PARAMS, ARGS, FOUND, MESSAGE)                                             \
  int MPI_##NAME PARAMS {                                                                     \
    MPI_Status tmp;                                                                           \
    if (status == MPI_STATUS_IGNORE) status = &tmp;                                           \
    int64_t t0 = di_ticks();                                                                  \
    int rc = PMPI_##NAME ARGS;                                                                \
    probed(OP_MPI_##NAME, t0, comm, FOUND, source, tag, status, MESSAGE);                     \
    return rc;                                                                                \
  }
PROBE(Probe, (int source, int tag, MPI_Comm comm, MPI_Status *status), (source, tag, comm, status), 1, NULL)
PROBE(Iprobe, (int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status), (source, tag, comm, flag, status),
      *flag, NULL)
PROBE(Mprobe, (int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status),
      (source, tag, comm, message, status), 1, message)
PROBE(Improbe, (int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message, MPI_Status *status),
      (source, tag, comm, flag, message, status), *flag, message)

#define MRECV(NAME, CT)                                                                       \
  int MPI_##NAME(void *buf, CT count, MPI_Datatype dt, MPI_Message *message, MPI_Status *status) { \
    MPI_Status tmp;                                                                           \
    if (status == MPI_STATUS_IGNORE) status = &tmp;                                           \
    MPI_Message m = *message;                                                                 \
    int64_t t0 = di_ticks();                                                                  \
    int rc = PMPI_##NAME(buf, count, dt, message, status);                                    \
    int64_t t1 = di_ticks();                                                                  \
    MPI_Count n = 0;                                                                          \
    PMPI_Get_count_c(status, MPI_BYTE, &n);                                                   \
    call_on(OP_MPI_##NAME, t0, t1, msg_take(m), status->MPI_SOURCE, status->MPI_TAG, (int64_t)n, 0, 0); \
    return rc;                                                                                \
  }
MRECV(Mrecv, int) MRECV(Mrecv_c, MPI_Count)

#define IMRECV(NAME, CT)                                                                      \
  int MPI_##NAME(void *buf, CT count, MPI_Datatype dt, MPI_Message *message, MPI_Request *request) { \
    MPI_Message m = *message;                                                                 \
    int64_t t0 = di_ticks();                                                                  \
    int rc = PMPI_##NAME(buf, count, dt, message, request);                                   \
    call_on(OP_MPI_##NAME, t0, di_ticks(), msg_take(m), -1, -1, (int64_t)count * tsize(dt), req_add(*request, 1), 1); \
    return rc;                                                                                \
  }
IMRECV(Imrecv, int) IMRECV(Imrecv_c, MPI_Count)

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
    int64_t t1 = di_ticks();                                                                  \
    sendrecv_recv_half(t1, status);                                                           \
    call_until(OP_MPI_##NAME, t0, t1, comm, dest, stag, (int64_t)scount * tsize(stype), 0, 0); \
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
    int64_t t1 = di_ticks();                                                                  \
    sendrecv_recv_half(t1, status);                                                           \
    call_until(OP_MPI_##NAME, t0, t1, comm, dest, stag, (int64_t)count * tsize(dt), 0, 0);    \
    return rc;                                                                                \
  }
SENDRECV_REPLACE(Sendrecv_replace, int) SENDRECV_REPLACE(Sendrecv_replace_c, MPI_Count)

/* ---- persistent requests: the parameters of *_init, a post at each Start ----
 * Every start writes a KIND_REQ_START record (peer, tag, comm, bytes, a new request id,
 * aux 1 send / 2 receive) before the Start/Startall CALL; the request then completes
 * in a Wait/Test like any other. */
#define PERSIST_SLOTS 4096
typedef struct { MPI_Request h; uint64_t cid; int32_t peer, tag; int64_t bytes; int recv, used; } persist_slot;
static persist_slot di_persist[PERSIST_SLOTS];

static void persist_put(MPI_Request h, persist_slot p) {
  if (!di_enabled || h == MPI_REQUEST_NULL) return;
  p.h = h;
  p.used = 1;
  req_lock();
  for (uint32_t i = req_hash(h) & (PERSIST_SLOTS - 1), k = 0; k < 64; i = (i + 1) & (PERSIST_SLOTS - 1), k++)
    if (!di_persist[i].used || di_persist[i].h == h) { di_persist[i] = p; break; }
  req_unlock();
}

/* The slot of persistent request h (a copy; used = 0 when unknown), dropped when `drop`. */
static persist_slot persist_find(MPI_Request h, int drop) {
  persist_slot p = {0};
  req_lock();
  for (uint32_t i = req_hash(h) & (PERSIST_SLOTS - 1), k = 0; k < 64; i = (i + 1) & (PERSIST_SLOTS - 1), k++)
    if (di_persist[i].used && di_persist[i].h == h) {
      p = di_persist[i];
      if (drop) di_persist[i].used = 0;
      break;
    }
  req_unlock();
  return p;
}

/* *_init of a send (RECV 0, peer = dest) or a receive (RECV 1, peer = source). */
#define P_INIT(NAME, CT, BUF_T, RECV)                                                         \
  int MPI_##NAME(BUF_T buf, CT count, MPI_Datatype dt, int peer, int tag, MPI_Comm comm,      \
                 MPI_Request *request) {                                                      \
    int64_t t0 = di_ticks();                                                                  \
    int rc = PMPI_##NAME(buf, count, dt, peer, tag, comm, request);                           \
    int64_t bytes = (int64_t)count * tsize(dt);                                               \
    persist_put(*request, (persist_slot){0, comm_id(comm), peer, tag, bytes, RECV, 0});       \
    call(OP_MPI_##NAME, t0, comm, peer, tag, bytes, 0, 0);                                    \
    return rc;                                                                                \
  }
P_INIT(Send_init, int, const void *, 0) P_INIT(Send_init_c, MPI_Count, const void *, 0)
P_INIT(Ssend_init, int, const void *, 0) P_INIT(Ssend_init_c, MPI_Count, const void *, 0)
P_INIT(Bsend_init, int, const void *, 0) P_INIT(Bsend_init_c, MPI_Count, const void *, 0)
P_INIT(Rsend_init, int, const void *, 0) P_INIT(Rsend_init_c, MPI_Count, const void *, 0)
P_INIT(Recv_init, int, void *, 1) P_INIT(Recv_init_c, MPI_Count, void *, 1)

static void started(MPI_Request h, int64_t t) {
  persist_slot p = persist_find(h, 0);
  if (!p.used) return;
  di_rec *r = di_slot();
  if (!r) return;
  *r = (di_rec){0, 0, p.peer, t, t, p.bytes, p.cid, p.tag, p.recv ? 2 : 1, req_add(h, p.recv), 0};
  di_commit(r, KIND_REQ_START);
}

int MPI_Start(MPI_Request *request) {
  int64_t t0 = di_ticks();
  int rc = PMPI_Start(request);
  int64_t t1 = di_ticks();
  started(*request, t1);
  call_until(OP_MPI_Start, t0, t1, MPI_COMM_NULL, -1, 0, 0, 0, 1);
  return rc;
}

int MPI_Startall(int count, MPI_Request reqs[]) {
  int64_t t0 = di_ticks();
  int rc = PMPI_Startall(count, reqs);
  int64_t t1 = di_ticks();
  for (int i = 0; i < count; i++) started(reqs[i], t1);
  call_until(OP_MPI_Startall, t0, t1, MPI_COMM_NULL, -1, 0, 0, 0, count);
  return rc;
}

/* ---- completion ---- */
#define STACK_REQS 64
int MPI_Wait(MPI_Request *request, MPI_Status *status) {
  MPI_Status tmp;
  if (status == MPI_STATUS_IGNORE) status = &tmp;
  MPI_Request h = *request;
  int64_t t0 = di_ticks();
  int rc = PMPI_Wait(request, status);
  int64_t t1 = di_ticks();
  req_done(h, status, t1);
  call_until(OP_MPI_Wait, t0, t1, MPI_COMM_NULL, -1, 0, 0, 0, 1);
  return rc;
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
  MPI_Status tmp;
  if (status == MPI_STATUS_IGNORE) status = &tmp;
  MPI_Request h = *request;
  int64_t t0 = di_ticks();
  int rc = PMPI_Test(request, flag, status);
  int64_t t1 = di_ticks();
  if (*flag) req_done(h, status, t1);
  call_until(OP_MPI_Test, t0, t1, MPI_COMM_NULL, -1, *flag, 0, 0, 1);
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
  call_until(OP_MPI_Waitall, t0, t, MPI_COMM_NULL, -1, 0, 0, 0, count);
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
  call_until(OP_MPI_Testall, t0, t, MPI_COMM_NULL, -1, *flag, 0, 0, count);
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
  int64_t t1 = di_ticks();
  if (*index != MPI_UNDEFINED && c.h) req_done(c.h[*index], status, t1);
  call_until(OP_MPI_Waitany, t0, t1, MPI_COMM_NULL, -1, 1, 0, 0, count);
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
  int64_t t1 = di_ticks();
  if (*flag && *index != MPI_UNDEFINED && c.h) req_done(c.h[*index], status, t1);
  call_until(OP_MPI_Testany, t0, t1, MPI_COMM_NULL, -1, *flag, 0, 0, count);
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
    call_until(OP_MPI_##NAME, t0, t, MPI_COMM_NULL, -1, *outcount, 0, 0, count);               \
    free_reqs(&c);                                                                              \
    return rc;                                                                                  \
  }
SOME(Waitsome) SOME(Testsome)

int MPI_Request_free(MPI_Request *request) {
  MPI_Request h = *request;
  int64_t t0 = di_ticks();
  int rc = PMPI_Request_free(request);
  int64_t t1 = di_ticks();
  req_done(h, NULL, t1); /* freed before completion: the request is over for di */
  persist_find(h, 1);
  call_until(OP_MPI_Request_free, t0, t1, MPI_COMM_NULL, -1, 0, 0, 0, 1);
  return rc;
}

