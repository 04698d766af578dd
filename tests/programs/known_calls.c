/* The C twin of known_calls.py (classic int-count MPI calls, stdio file I/O).
 * Build: mpicc -O1 -o known_calls known_calls.c; run: mpiexec -n 4 ./known_calls DIR */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 4 || argc < 2) MPI_Abort(MPI_COMM_WORLD, 2);
  double grad[100], buf[3] = {0}, send[64], recv[64];
  for (int i = 0; i < 100; i++) grad[i] = rank;
  MPI_Allreduce(MPI_IN_PLACE, grad, 100, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  int params[50] = {0};
  MPI_Bcast(params, 50, MPI_INT, 2, MPI_COMM_WORLD);
  unsigned char bytes[1000] = {0};
  if (rank == 0) MPI_Send(bytes, 1000, MPI_BYTE, 1, 11, MPI_COMM_WORLD);
  else if (rank == 1) MPI_Recv(bytes, 1000, MPI_BYTE, 0, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  else if (rank == 2) MPI_Send(buf, 3, MPI_DOUBLE, 3, 12, MPI_COMM_WORLD);
  else MPI_Recv(buf, 3, MPI_DOUBLE, 2, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (rank == 0)
    for (int i = 0; i < 3; i++) MPI_Recv(buf, 3, MPI_DOUBLE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  else
    MPI_Send(buf, rank, MPI_DOUBLE, 0, 20 + rank, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD); /* no ring message below can meet the wildcard receives */
  MPI_Request reqs[2];
  for (int i = 0; i < 64; i++) send[i] = rank;
  MPI_Isend(send, 64, MPI_DOUBLE, (rank + 1) % 4, 30, MPI_COMM_WORLD, &reqs[0]);
  MPI_Irecv(recv, 64, MPI_DOUBLE, (rank + 3) % 4, 30, MPI_COMM_WORLD, &reqs[1]);
  MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  float part[10];
  for (int i = 0; i < 10; i++) part[i] = 1;
  MPI_Allreduce(MPI_IN_PLACE, part, 10, MPI_FLOAT, MPI_SUM, half);
  char path[4096];
  snprintf(path, sizeof path, "%s/rank-%d.dat", argv[1], rank);
  size_t n = 4096 * (size_t)(rank + 1);
  char *chunk = malloc(3 * n + 1);
  memset(chunk, 'x', 3 * n);
  FILE *f = fopen(path, "wb");
  for (int i = 0; i < 3; i++) fwrite(chunk, 1, n, f);
  fclose(f);
  f = fopen(path, "rb");
  size_t got = fread(chunk, 1, 3 * n + 1, f);
  fclose(f);
  free(chunk);
  MPI_Finalize();
  return got == 3 * n ? 0 : 1;
}
