/* NVTX v3 calls for tests/test_capture_nvtx.py: push/pop nesting in the default domain and
 * in a domain "trainer" (with a registered string, a category name and a colour), a
 * start/end range that ends on another thread, a mark, and a second thread's own range
 * (the thread named with nvtxNameOsThreadA), a start/end range never ended and a push
 * never popped.
 * With MPI (argv[1] == "mpi") each rank wraps its part in "rank R" and does a barrier. */
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifdef WITH_MPI
#include <mpi.h>
#endif

static nvtxRangeId_t pending;

static void *worker(void *arg) {
  (void)arg;
  nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), "loader thread");
  nvtxRangePushA("worker");
  usleep(2000);
  nvtxRangePop();
  nvtxRangeEnd(pending); /* started on the main thread */
  return NULL;
}

int main(int argc, char **argv) {
  int rank = 0;
  char label[32] = "job";
#ifdef WITH_MPI
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  snprintf(label, sizeof label, "rank %d", rank);
#endif
  (void)argc;
  (void)argv;
  nvtxRangePushA(label);
  nvtxDomainHandle_t dom = nvtxDomainCreateA("trainer");
  nvtxDomainNameCategoryA(dom, 7, "model");
  nvtxStringHandle_t fwd = nvtxDomainRegisterStringA(dom, "forward");
  nvtxEventAttributes_t a;
  memset(&a, 0, sizeof a);
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.category = 7;
  a.colorType = NVTX_COLOR_ARGB;
  a.color = 0xFF00FF00;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = fwd;
  for (int step = 0; step < 3; step++) {
    nvtxDomainRangePushEx(dom, &a);
    nvtxRangePushA("matmul");
    usleep(1000);
    nvtxRangePop();
    nvtxDomainRangePop(dom);
  }
  nvtxMarkA("checkpoint saved");
  pending = nvtxRangeStartA("async load");
  pthread_t th;
  pthread_create(&th, NULL, worker, NULL);
  pthread_join(th, NULL);
#ifdef WITH_MPI
  MPI_Barrier(MPI_COMM_WORLD);
#endif
  nvtxRangePop();
  nvtxRangeStartA("never ended"); /* dropped at ingest, and counted */
  nvtxRangePushA("left open");    /* ends at the exit */
#ifdef WITH_MPI
  MPI_Finalize();
#endif
  return 0;
}
