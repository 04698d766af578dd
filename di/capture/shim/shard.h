/* di capture shard writer, shared by the PMPI and POSIX-I/O shims.
 *
 * Layout under $DI_CAPTURE_DIR (schemas/capture/v1/shard-header.schema.json):
 *   LIB-HOST-PID.json        header: process, rank, clock, state (rewritten atomically)
 *   LIB-HOST-PID.str         string table: records {u32 id, u32 len, len bytes}
 *   LIB-HOST-PID-TID.bin     one per thread: fixed 64-byte records (struct di_rec)
 * Record times are ticks: the CPU's invariant time-stamp counter where it has one
 * (x86 with constant_tsc and nonstop_tsc), else CLOCK_MONOTONIC ns; every
 * DI_CALIBRATE_EVERY records a KIND_TICKS record pairs a tick count with
 * CLOCK_MONOTONIC ns, and ingest fits ns = a + b * ticks per process.
 * A thread file starts with a staging area, mapped MAP_SHARED once: slot 0 holds
 * `committed` (in its t0), slots 1..DI_STAGE_RECS the records being written.  When
 * the staging area is full, one pwrite appends its records after it, then the
 * slots are zeroed, then `committed` grows by their number.  Records written
 * before a SIGKILL are in the page cache either way (staged or appended): ingest
 * takes the appended ones (file size), then the non-empty staging slots from
 * index appended - committed on (the ones a kill between pwrite and the new
 * `committed` left staged were appended already).  Writing through one mapped
 * area and pwrite costs a fraction of faulting in fresh mapped pages of the file
 * (ext4 takes a page_mkwrite fault per page).  `kind` is stored last, so a record
 * cut short stays 0 and ingest drops it.  The writer uses raw system calls, never
 * the wrapped libc functions, and never records its own I/O. */
#ifndef DI_SHARD_H
#define DI_SHARD_H
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "ops.h"
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define DI_HAVE_TSC 1
#endif

typedef struct {
  uint16_t kind;  /* enum di_kind, written last */
  uint16_t op;    /* enum di_op */
  int32_t peer;   /* peer or root rank in comm, -1 none; KIND_COMM: my rank in it */
  int64_t t0, t1; /* ns, CLOCK_MONOTONIC (plus any test offset) */
  int64_t bytes;  /* payload bytes; KIND_CLOCK: offset to rank 0 in ns */
  uint64_t comm;  /* communicator id; KIND_IO: file name string id */
  int32_t tag;    /* message tag; KIND_COMM: comm size; KIND_CLOCK: phase */
  int32_t aux;    /* KIND_CALL: request count; KIND_IO: fd */
  uint64_t req;   /* request id (per process), 0 none; KIND_COMM: parent comm */
  int64_t aux2;   /* KIND_IO: file offset or -1; KIND_COMM: members string id;
                     KIND_CLOCK: round-trip ns; KIND_CALL: datatype size */
} di_rec;
_Static_assert(sizeof(di_rec) == 64, "shard record is 64 bytes");

#define DI_STAGE_RECS 1024 /* records staged per thread between appends (64 KiB) */
#define DI_STAGE_BYTES ((DI_STAGE_RECS + 1) * sizeof(di_rec)) /* slot 0: the committed count */
#define DI_CALIBRATE_EVERY 1024 /* records between tick calibrations */
#ifndef DI_LIB
#error "define DI_LIB (mpi, io or nccl)"
#endif

static char di_dir[3072];
static char di_host[256];
static int di_enabled;
static int di_pid;
static unsigned di_gen = 1;        /* bumped in a forked child: thread state is stale */
static int64_t di_test_offset_ns;  /* test hook: DI_CAPTURE_TEST_CLOCK_OFFSETS_NS */
static double di_test_drift;       /* test hook: DI_CAPTURE_TEST_CLOCK_DRIFT_PPM */
static int di_str_fd = -1;
static int di_use_tsc;
static pthread_mutex_t di_str_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct {
  di_rec *stage;      /* the mapped staging area: stage[0].t0 = committed, records from stage[1] */
  uint32_t n;         /* records staged */
  uint32_t limit;     /* DI_STAGE_RECS, 0 when this thread records nothing (its file failed) */
  uint64_t committed; /* records appended after the staging area */
  uint64_t total;     /* records this thread wrote (calibration cadence) */
  int fd;
  unsigned gen;
} di_thread_shard;
#ifndef DI_TLS_MODEL
#define DI_TLS_MODEL "initial-exec" /* LD_PRELOADed shims; a dlopened one (nvtx.c) needs global-dynamic */
#endif
static __thread di_thread_shard di_ts __attribute__((tls_model(DI_TLS_MODEL)));

static inline int64_t di_raw_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline int64_t di_now(void) {
  int64_t t = di_raw_now();
  if (__builtin_expect(di_test_drift != 0.0, 0)) t += (int64_t)((double)t * di_test_drift);
  return t + di_test_offset_ns;
}

/* The record clock: TSC ticks, or CLOCK_MONOTONIC ns where there is no invariant TSC. */
static inline int64_t di_ticks(void) {
#ifdef DI_HAVE_TSC
  if (__builtin_expect(di_use_tsc, 1)) return (int64_t)__rdtsc();
#endif
  return di_now();
}

static int di_sys_open(const char *path, int flags, int mode) {
  return (int)syscall(SYS_openat, AT_FDCWD, path, flags | O_CLOEXEC, mode);
}

static void di_sys_write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len) {
    long w = syscall(SYS_write, fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    len -= (size_t)w;
  }
}

static int di_env_rank(void) {
  const char *names[] = {"PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "RANK", NULL}; /* RANK: torchrun */
  for (int i = 0; names[i]; i++) {
    const char *v = getenv(names[i]);
    if (v && *v) return atoi(v);
  }
  return -1;
}

static int64_t di_list_pick(const char *list, int index) {
  /* the index-th comma-separated integer of list, 0 when absent */
  if (!list || index < 0) return 0;
  for (int i = 0; i < index; i++) {
    list = strchr(list, ',');
    if (!list) return 0;
    list++;
  }
  return strtoll(list, NULL, 10);
}

static void di_calibrate_if_recording(void);

/* Write the header (JSON) atomically; `extra` is more JSON members or "".  A thread
 * that already records also writes a tick calibration (so every process that exits
 * normally has calibrations at both ends of its records). */
static void di_write_header(const char *state, int rank, int size, const char *extra) {
  if (!di_enabled) return;
  char path[3400], tmp[3500], exe[1024] = "";
  long n = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = 0;
  for (char *c = exe; *c; c++)
    if (*c == '"' || *c == '\\' || (unsigned char)*c < 32) *c = '?';
  snprintf(path, sizeof path, "%s/%s-%s-%d.json", di_dir, DI_LIB, di_host, di_pid);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  struct timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  int64_t now_ns = di_now(), now_ticks = di_ticks();
  char buf[8192];
  int len = snprintf(buf, sizeof buf,
      "{\"format\": \"di-shard\", \"version\": 1, \"lib\": \"%s\", \"host\": \"%s\", "
      "\"pid\": %d, \"ppid\": %d, \"exe\": \"%s\", \"rank\": %d, \"env_rank\": %d, "
      "\"world_size\": %d, \"state\": \"%s\", \"record_bytes\": %d, \"staging_records\": %d, "
      "\"clock\": {\"id\": \"CLOCK_MONOTONIC\", \"ticks\": \"%s\", \"now_ns\": %lld, \"now_ticks\": %lld, \"realtime_ns\": %lld}%s%s}\n",
      DI_LIB, di_host, di_pid, (int)getppid(), exe, rank, di_env_rank(), size, state,
      (int)sizeof(di_rec), DI_STAGE_RECS, di_use_tsc ? "tsc" : "ns", (long long)now_ns, (long long)now_ticks,
      (long long)rt.tv_sec * 1000000000LL + rt.tv_nsec, *extra ? ", " : "", extra);
  int fd = di_sys_open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  di_sys_write_all(fd, buf, (size_t)(len < (int)sizeof buf ? len : (int)sizeof buf - 1));
  syscall(SYS_close, fd);
  syscall(SYS_renameat, AT_FDCWD, tmp, AT_FDCWD, path);
  di_calibrate_if_recording();
}

static void di_open_strings(void) {
  char path[3400];
  snprintf(path, sizeof path, "%s/%s-%s-%d.str", di_dir, DI_LIB, di_host, di_pid);
  di_str_fd = di_sys_open(path, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC, 0644);
}

/* Append one string; the caller holds di_str_lock. */
static void di_open_strings(void);
static void di_put_string(uint32_t id, const char *s, uint32_t len) {
  if (di_str_fd < 0) di_open_strings(); /* created on the first string */
  if (di_str_fd < 0) return;
  char head[8];
  memcpy(head, &id, 4);
  memcpy(head + 4, &len, 4);
  char small[512];
  if (len + 8 <= sizeof small) { /* one write: a kill never splits a short string */
    memcpy(small, head, 8);
    memcpy(small + 8, s, len);
    di_sys_write_all(di_str_fd, small, len + 8);
  } else {
    di_sys_write_all(di_str_fd, head, 8);
    di_sys_write_all(di_str_fd, s, len);
  }
}

/* ---- string interning: open addressing, ids from 1 ---- */
#define DI_STR_SLOTS 65536
typedef struct { uint64_t hash; uint32_t id; char *s; } di_str_slot;
static di_str_slot *di_strs;
static uint32_t di_str_next = 1;

static uint64_t di_hash(const char *s, size_t len) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
  return h | 1;
}

static uint32_t di_intern_len(const char *s, size_t len) {
  if (!di_enabled || !s) return 0;
  uint64_t h = di_hash(s, len);
  uint32_t id = 0;
  pthread_mutex_lock(&di_str_lock);
  if (!di_strs) di_strs = calloc(DI_STR_SLOTS, sizeof *di_strs);
  if (di_strs) {
    for (uint32_t i = (uint32_t)h & (DI_STR_SLOTS - 1), probes = 0; probes < DI_STR_SLOTS;
         i = (i + 1) & (DI_STR_SLOTS - 1), probes++) {
      di_str_slot *sl = &di_strs[i];
      if (!sl->hash) {
        if (di_str_next >= DI_STR_SLOTS * 3 / 4) break; /* full: string stays unnamed */
        sl->s = malloc(len + 1);
        if (!sl->s) break;
        memcpy(sl->s, s, len);
        sl->s[len] = 0;
        sl->hash = h;
        sl->id = id = di_str_next++;
        di_put_string(id, s, (uint32_t)len);
        break;
      }
      if (sl->hash == h && strncmp(sl->s, s, len) == 0 && sl->s[len] == 0) {
        id = sl->id;
        break;
      }
    }
  }
  pthread_mutex_unlock(&di_str_lock);
  return id;
}

static __attribute__((unused)) uint32_t di_intern(const char *s) { return s ? di_intern_len(s, strlen(s)) : 0; }

/* ---- per-thread record files ---- */
static void di_calibrate(di_rec *r);

/* Create this thread's file and map its staging area (its pages faulted in once, here). */
static int di_thread_open(di_thread_shard *t) {
  char path[3400];
  snprintf(path, sizeof path, "%s/%s-%s-%d-%ld.bin", di_dir, DI_LIB, di_host, di_pid, (long)syscall(SYS_gettid));
  t->fd = di_sys_open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (t->fd < 0 || syscall(SYS_ftruncate, t->fd, (off_t)DI_STAGE_BYTES) != 0) return -1;
  void *p = (void *)syscall(SYS_mmap, NULL, DI_STAGE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, t->fd, 0);
  if (p == MAP_FAILED || ((long)p < 0 && (long)p > -4096)) return -1;
  t->stage = p;
  memset(t->stage, 0, DI_STAGE_BYTES);
  t->limit = DI_STAGE_RECS;
  return 0;
}

/* Append the staged records to the file, then empty the staging area (see the top). */
static int di_append_staged(di_thread_shard *t) {
  const char *p = (const char *)(t->stage + 1);
  size_t len = (size_t)t->n * sizeof(di_rec);
  off_t off = (off_t)DI_STAGE_BYTES + (off_t)(t->committed * sizeof(di_rec));
  while (len) {
    long w = syscall(SYS_pwrite64, t->fd, p, len, off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    off += w;
    len -= (size_t)w;
  }
  memset(t->stage + 1, 0, (size_t)t->n * sizeof(di_rec));
  t->committed += t->n;
  __atomic_store_n(&t->stage[0].t0, (int64_t)t->committed, __ATOMIC_RELEASE);
  t->n = 0;
  return 0;
}

static inline di_rec *di_take_slot(di_thread_shard *t) {
  t->total++;
  return &t->stage[1 + t->n++];
}

/* A slot when the fast path cannot give one: first record of the thread (or of a
 * forked child), staging area full, or a calibration due; NULL when recording failed. */
static di_rec *di_slot_slow(void) {
  di_thread_shard *t = &di_ts;
  if (t->gen != di_gen) { /* a forked child's inherited mapping is the parent's: left alone */
    memset(t, 0, sizeof *t);
    t->gen = di_gen;
    if (di_thread_open(t) != 0) t->limit = 0;
  }
  if (!t->limit) return NULL;
  if (t->n >= t->limit && di_append_staged(t) != 0) { t->limit = 0; return NULL; }
  if (t->total % DI_CALIBRATE_EVERY == 0) { /* a calibration first, then the record */
    di_calibrate(di_take_slot(t));
    if (t->n >= t->limit && di_append_staged(t) != 0) { t->limit = 0; return NULL; }
  }
  return di_take_slot(t);
}

static inline void di_commit(di_rec *r, uint16_t kind);

/* Write a KIND_TICKS record in slot r: ticks between two ns reads, paired with their midpoint. */
static void di_calibrate(di_rec *r) {
  int64_t a = di_now(), tk = di_ticks(), b = di_now();
  *r = (di_rec){0, 0, 0, tk, a + (b - a) / 2, 0, 0, 0, 0, 0, 0};
  di_commit(r, KIND_TICKS);
}

static void di_calibrate_if_recording(void) {
  di_thread_shard *t = &di_ts;
  if (!di_enabled || t->gen != di_gen || !t->limit) return;
  if (t->n >= t->limit && di_append_staged(t) != 0) { t->limit = 0; return; }
  di_calibrate(di_take_slot(t));
}

/* A slot for one record of this thread, or NULL when capture is off. */
static inline di_rec *di_slot(void) {
  if (!di_enabled) return NULL;
  di_thread_shard *t = &di_ts;
  if (__builtin_expect(t->gen == di_gen && t->n < t->limit && t->total % DI_CALIBRATE_EVERY, 1)) return di_take_slot(t);
  return di_slot_slow();
}

static inline void di_commit(di_rec *r, uint16_t kind) { __atomic_store_n(&r->kind, kind, __ATOMIC_RELEASE); }

/* Invariant TSC (constant rate, not stopped in idle states) per /proc/cpuinfo. */
static int di_tsc_invariant(void) {
#ifdef DI_HAVE_TSC
  const char *force = getenv("DI_CAPTURE_CLOCK");
  if (force && strcmp(force, "monotonic") == 0) return 0;
  int fd = di_sys_open("/proc/cpuinfo", O_RDONLY, 0);
  if (fd < 0) return 0;
  static char buf[16384];
  long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
  syscall(SYS_close, fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  return strstr(buf, " constant_tsc") && strstr(buf, " nonstop_tsc");
#else
  return 0;
#endif
}

static void di_fork_prepare(void) { pthread_mutex_lock(&di_str_lock); }
static void di_fork_parent(void) { pthread_mutex_unlock(&di_str_lock); }
static void di_shard_child_reset(void);
static void di_fork_child(void) {
  pthread_mutex_unlock(&di_str_lock);
  if (!di_enabled) return;
  di_pid = (int)getpid();
  di_gen++;
  if (di_str_fd >= 0) syscall(SYS_close, di_str_fd);
  di_str_fd = -1;
  if (di_strs) /* the child's string file repeats the strings it inherited */
    for (uint32_t i = 0; i < DI_STR_SLOTS; i++)
      if (di_strs[i].hash) di_put_string(di_strs[i].id, di_strs[i].s, (uint32_t)strlen(di_strs[i].s));
  di_shard_child_reset();
}

/* Start capture when DI_CAPTURE_DIR is set; called from the shim's constructor. */
static void di_shard_init(void) {
  const char *dir = getenv("DI_CAPTURE_DIR");
  if (!dir || !*dir || strlen(dir) >= sizeof di_dir) return;
  strcpy(di_dir, dir);
  gethostname(di_host, sizeof di_host - 1);
  for (char *c = di_host; *c; c++)
    if (*c == '-' || *c == '/' || *c == '"' || *c == '\\') *c = '_';
  di_pid = (int)getpid();
  int rank = di_env_rank();
  di_test_offset_ns = di_list_pick(getenv("DI_CAPTURE_TEST_CLOCK_OFFSETS_NS"), rank);
  di_test_drift = (double)di_list_pick(getenv("DI_CAPTURE_TEST_CLOCK_DRIFT_PPM"), rank) * 1e-6;
  di_use_tsc = di_tsc_invariant();
  di_enabled = 1;
  pthread_atfork(di_fork_prepare, di_fork_parent, di_fork_child);
}
#endif
