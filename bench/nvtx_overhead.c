/* Per-range cost of di's NVTX injection library: nvtxRangePushA + nvtxRangePop, and
 * nvtxDomainRangePushEx (registered string, colour, category) + nvtxDomainRangePop, ns per
 * push+pop pair, median over rounds.  Run by bench/app_overhead.py with and without
 * NVTX_INJECTION64_PATH (without: NVTX's own no-op cost).  Every round writes more records
 * than a thread's staging area holds, so appending to the shard file is in every figure.
 * Usage: nvtx_overhead ITERATIONS ROUNDS */
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  long iters = argc > 1 ? atol(argv[1]) : 100000;
  int rounds = argc > 2 ? atoi(argv[2]) : 21;
  nvtxDomainHandle_t dom = nvtxDomainCreateA("bench");
  nvtxEventAttributes_t a;
  memset(&a, 0, sizeof a);
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.category = 1;
  a.colorType = NVTX_COLOR_ARGB;
  a.color = 0xFF336699;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = nvtxDomainRegisterStringA(dom, "forward");
  double *ascii = calloc(rounds, sizeof(double)), *domain = calloc(rounds, sizeof(double));
  for (int r = 0; r < rounds; r++) {
    double t = now_ns();
    for (long i = 0; i < iters; i++) {
      nvtxRangePushA("step");
      nvtxRangePop();
    }
    ascii[r] = (now_ns() - t) / iters;
    t = now_ns();
    for (long i = 0; i < iters; i++) {
      nvtxDomainRangePushEx(dom, &a);
      nvtxDomainRangePop(dom);
    }
    domain[r] = (now_ns() - t) / iters;
  }
  qsort(ascii, rounds, sizeof(double), cmp);
  qsort(domain, rounds, sizeof(double), cmp);
  printf("{\"push_pop_ascii_ns\": %.1f, \"push_pop_ascii_min_ns\": %.1f, \"push_pop_domain_registered_ns\": %.1f, "
         "\"push_pop_domain_registered_min_ns\": %.1f}\n", ascii[rounds / 2], ascii[0], domain[rounds / 2], domain[0]);
  return 0;
}
