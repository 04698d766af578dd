/* Collective wrappers of the PMPI shim, included once by pmpi.c (they use its
 * static helpers): blocking and nonblocking forms, classic and MPI-4 large-count
 * (_c) signatures, generated from one macro per argument shape. */
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

