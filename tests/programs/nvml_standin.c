/* A stand-in for libnvidia-ml.so.1 with the NVML symbols di's sampler calls
 * through nvidia-ml-py, for tests on machines without an NVIDIA driver.
 * Build: cc -shared -fPIC -Wl,-soname,libnvidia-ml.so.1 -o libnvidia-ml.so.1 nvml_standin.c
 * Two devices; device i reports: utilization 40+10i % (memory 20 %), memory used
 * (1+i) GiB, power 250000+1000i mW, energy +1000 mJ per read, SM clock 1980 MHz,
 * memory clock 2619 MHz, 55+i C, and per nvmlDeviceGetFieldValues call PCIe
 * TX/RX +1000/+2000 bytes and NVLink TX/RX +10/+20 KiB (cumulative).
 * NVML_STANDIN_INIT=9 makes initialization fail as NVML does with its library present and
 * the kernel driver not loaded (NVML_ERROR_DRIVER_NOT_LOADED). */
#include <stdlib.h>
#include <string.h>

typedef struct { int index; unsigned long long energy, calls; } device;
static device devices[2] = {{0, 0, 0}, {1, 0, 0}};
typedef device *nvmlDevice_t;
typedef struct { unsigned gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef union { double d; unsigned ui; unsigned long ul; unsigned long long ull; long long sll; int si; unsigned short us; } nvmlValue_t;
typedef struct { unsigned fieldId, scopeId; long long timestamp, latencyUsec; int valueType, nvmlReturn; nvmlValue_t value; } nvmlFieldValue_t;

enum { PCIE_TX = 197, PCIE_RX = 198, NVLINK_TX = 138, NVLINK_RX = 139, NOT_SUPPORTED = 3, VALUE_ULL = 3 };

static int init_result(void) { const char *e = getenv("NVML_STANDIN_INIT"); return e ? atoi(e) : 0; }
int nvmlInitWithFlags(unsigned flags) { (void)flags; return init_result(); }
int nvmlInit_v2(void) { return init_result(); }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int r) { return r == 9 ? "Driver Not Loaded" : r ? "Not Supported" : "Success"; }
int nvmlDeviceGetCount_v2(unsigned *n) { *n = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t *h) {
  if (i >= 2) return 2;
  *h = &devices[i];
  return 0;
}
int nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) { u->gpu = 40 + 10 * d->index; u->memory = 20; return 0; }
int nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
  m->total = 80ULL << 30; m->used = (1ULL + d->index) << 30; m->free = m->total - m->used; return 0;
}
int nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned *mw) { *mw = 250000 + 1000 * d->index; return 0; }
int nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *mj) { d->energy += 1000; *mj = d->energy; return 0; }
int nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned *mhz) { (void)d; *mhz = type == 1 ? 1980 : 2619; return 0; }
int nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned *c) { (void)sensor; *c = 55 + d->index; return 0; }
int nvmlDeviceGetFieldValues(nvmlDevice_t d, int n, nvmlFieldValue_t *v) {
  d->calls++;
  for (int i = 0; i < n; i++) {
    unsigned long long per = v[i].fieldId == PCIE_TX ? 1000 : v[i].fieldId == PCIE_RX ? 2000
                           : v[i].fieldId == NVLINK_TX ? 10 : v[i].fieldId == NVLINK_RX ? 20 : 0;
    v[i].valueType = VALUE_ULL;
    v[i].nvmlReturn = per ? 0 : NOT_SUPPORTED;
    v[i].value.ull = per * d->calls;
  }
  return 0;
}
