/* Per-call cost of di's capture shims, wrapped vs not, in one process.
 * Run with both shims in LD_PRELOAD and DI_CAPTURE_DIR set (bench/capture_overhead.py
 * does this): each operation is timed through its public name (MPI_X, read...: the
 * shim's wrapper) and directly (PMPI_X; libc's own symbol from dlopen("libc.so.6")),
 * alternating, over many rounds; medians over rounds (and the spread of the
 * overhead) are printed as one JSON object per operation.  Every round writes
 * more records than a thread's staging area holds, so the appends to the shard
 * file are in every round's figure.
 * Usage: capture_overhead_calls ITERATIONS ROUNDS SCRATCH_FILE */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static long iters;
static int rounds;
static int fd;
static FILE *fp;
static char byte;
static double x = 1, y;
static ssize_t (*libc_pread)(int, void *, size_t, off_t);
static ssize_t (*libc_write)(int, const void *, size_t);
static off_t (*libc_lseek)(int, off_t, int);
static size_t (*libc_fwrite)(const void *, size_t, size_t, FILE *);

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Each round times ITERATIONS wrapped and ITERATIONS direct calls, in alternating
 * order; the figures are medians over rounds (the overhead: of each round's
 * difference), ns per call. */
#define BODY(NAME, CALLS, WRAPPED, DIRECT)                                         \
  do {                                                                             \
    double w[rounds], d[rounds], o[rounds];                                        \
    for (int r = 0; r < rounds; r++) {                                             \
      double t0 = now_ns(), t1, t2;                                                \
      if (r % 2) {                                                                 \
        for (long i = 0; i < iters; i++) { DIRECT; }                               \
        t1 = now_ns();                                                             \
        for (long i = 0; i < iters; i++) { WRAPPED; }                              \
        t2 = now_ns();                                                             \
        d[r] = t1 - t0, w[r] = t2 - t1;                                            \
      } else {                                                                     \
        for (long i = 0; i < iters; i++) { WRAPPED; }                              \
        t1 = now_ns();                                                             \
        for (long i = 0; i < iters; i++) { DIRECT; }                               \
        t2 = now_ns();                                                             \
        w[r] = t1 - t0, d[r] = t2 - t1;                                            \
      }                                                                            \
      w[r] /= iters * (CALLS), d[r] /= iters * (CALLS), o[r] = w[r] - d[r];        \
    }                                                                              \
    double mo = median(o, rounds), lo = o[0], hi = o[rounds - 1];                  \
    printf("{\"op\": \"%s\", \"wrapped_ns\": %.1f, \"direct_ns\": %.1f, \"overhead_ns\": %.1f, " \
           "\"overhead_min_ns\": %.1f, \"overhead_max_ns\": %.1f, \"rounds\": %d}\n",       \
           NAME, median(w, rounds), median(d, rounds), mo, lo, hi, rounds);        \
  } while (0)

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  iters = atol(argv[1]);
  rounds = atoi(argv[2]);
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
  void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  libc_pread = dlsym(libc, "pread");
  libc_write = dlsym(libc, "write");
  libc_lseek = dlsym(libc, "lseek");
  libc_fwrite = dlsym(libc, "fwrite");
  fd = open(argv[3], O_RDWR | O_CREAT | O_TRUNC, 0644); /* opened through the shim: traced */
  write(fd, "x", 1);
  fp = fopen("/dev/null", "w");
  MPI_Request rq[2];
  BODY("MPI_Allreduce", 1, MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
       PMPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  BODY("MPI_Allreduce_c", 1, MPI_Allreduce_c(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
       PMPI_Allreduce_c(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  BODY("MPI_Bcast", 1, MPI_Bcast(&x, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD), PMPI_Bcast(&x, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  BODY("MPI_Barrier", 1, MPI_Barrier(MPI_COMM_WORLD), PMPI_Barrier(MPI_COMM_WORLD));
  BODY("MPI_Isend+Irecv+Waitall (per call)", 3,
       MPI_Irecv(&y, 1, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD, &rq[0]); MPI_Isend(&x, 1, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD, &rq[1]);
       MPI_Waitall(2, rq, MPI_STATUSES_IGNORE),
       PMPI_Irecv(&y, 1, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD, &rq[0]); PMPI_Isend(&x, 1, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD, &rq[1]);
       PMPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
  BODY("pread", 1, pread(fd, &byte, 1, 0), libc_pread(fd, &byte, 1, 0));
  BODY("write", 1, write(fd, &byte, 1), libc_write(fd, &byte, 1));
  BODY("lseek", 1, lseek(fd, 0, SEEK_SET), libc_lseek(fd, 0, SEEK_SET));
  BODY("fwrite (buffered)", 1, fwrite(&byte, 1, 1, fp), libc_fwrite(&byte, 1, 1, fp));
  fclose(fp);
  close(fd);
  MPI_Finalize();
  return 0;
}
