/* One rank of a 2-rank "NCCL job" against the stand-in library: rank from $RANK.
 * 3 float allreduces of 1000 elements, a broadcast from rank 1 of 256 doubles, an
 * allgather of 10 int8 per rank, a send/recv pair, then on a communicator split
 * off the first: 2 bf16 allreduces of 64 elements; then on a 1-rank communicator of its own:
 * 2 float32 allreduces of 32 elements. */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
  int rank = atoi(getenv("RANK") ? getenv("RANK") : "0");
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  strcpy(id.internal, "di-test-job"); /* every rank gets the same id, as from ncclGetUniqueId + broadcast */
  ncclComm_t world, half;
  if (ncclCommInitRank(&world, 2, id, rank) != ncclSuccess) return 1;
  for (int i = 0; i < 3; i++) ncclAllReduce(NULL, NULL, 1000, ncclFloat32, ncclSum, world, NULL);
  ncclBroadcast(NULL, NULL, 256, ncclFloat64, 1, world, NULL);
  ncclAllGather(NULL, NULL, 10, ncclInt8, world, NULL);
  if (rank == 0) ncclSend(NULL, 100, ncclFloat32, 1, world, NULL);
  else ncclRecv(NULL, 100, ncclFloat32, 0, world, NULL);
  if (ncclCommSplit(world, 0, rank, &half, NULL) != ncclSuccess) return 1;
  for (int i = 0; i < 2; i++) ncclAllReduce(NULL, NULL, 64, ncclBfloat16, ncclSum, half, NULL);
  ncclUniqueId solo_id; /* a 1-rank communicator of this rank alone */
  memset(&solo_id, 0, sizeof solo_id);
  snprintf(solo_id.internal, sizeof solo_id.internal, "di-solo-%d", rank);
  ncclComm_t solo;
  if (ncclCommInitRank(&solo, 1, solo_id, 0) != ncclSuccess) return 1;
  for (int i = 0; i < 2; i++) ncclAllReduce(NULL, NULL, 32, ncclFloat32, ncclSum, solo, NULL);
  printf("rank %d done\n", rank);
  return 0;
}
