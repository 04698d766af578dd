/* A stand-in NCCL library for tests on machines without a GPU: the symbols the di
 * NCCL shim wraps, with NCCL's signatures (from nccl.h); each call takes ~0.2 ms
 * and succeeds. A communicator is a small struct holding rank and size. */
#include <nccl.h>
#include <stdlib.h>
#include <unistd.h>

struct ncclComm { int rank, size; };

static ncclComm_t make(int rank, int size) {
  ncclComm_t c = malloc(sizeof *c);
  c->rank = rank;
  c->size = size;
  return c;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  (void)id;
  *comm = make(rank, nranks);
  return ncclSuccess;
}
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config) {
  (void)color; (void)config;
  *newcomm = make(key, comm->size);
  return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) { *rank = comm->rank; return ncclSuccess; }
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) { *count = comm->size; return ncclSuccess; }
#define WORK usleep(200)
ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t o, ncclComm_t c, cudaStream_t st) {
  (void)s; (void)r; (void)n; (void)t; (void)o; (void)c; (void)st; WORK; return ncclSuccess;
}
ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st) {
  (void)s; (void)r; (void)n; (void)t; (void)root; (void)c; (void)st; WORK; return ncclSuccess;
}
ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st) {
  (void)s; (void)r; (void)n; (void)t; (void)c; (void)st; WORK; return ncclSuccess;
}
ncclResult_t ncclSend(const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st) {
  (void)s; (void)n; (void)t; (void)peer; (void)c; (void)st; WORK; return ncclSuccess;
}
ncclResult_t ncclRecv(void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st) {
  (void)r; (void)n; (void)t; (void)peer; (void)c; (void)st; WORK; return ncclSuccess;
}
