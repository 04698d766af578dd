/* di POSIX-I/O shim: records file I/O calls into di capture shards (see shard.h).
 *
 * Loaded with LD_PRELOAD; built by di/capture/build.py with cc.  Wraps
 * open/open64/openat/creat, read/write, pread/pwrite(64), readv/writev,
 * lseek(64), fsync/fdatasync, close, mmap(64), and stdio fopen(64)/fread/fwrite/
 * fflush/fclose (glibc's stdio reaches the kernel through internal symbols, not
 * through read/write, so it is wrapped on its own).  Only descriptors opened
 * through a wrapped call are recorded (files, not sockets or pipes); each
 * record names the file by an interned string id.
 * Reentrancy: a thread-local flag makes nested calls (the shim's own malloc,
 * a wrapped call made by another wrapped call) go straight to libc.  Threads:
 * one shard file per thread, interning under a mutex.  fork: the child gets
 * its own files (pthread_atfork in shard.h) and a header of its own. */
#undef _FORTIFY_SOURCE
#pragma GCC diagnostic ignored "-Wnonnull-compare"
#define DI_LIB "io"
#include "shard.h"
#include <dlfcn.h>
#include <stdarg.h>
#include <sys/uio.h>

#define MAX_FDS 65536
static uint32_t fd_name[MAX_FDS]; /* string id of the file open on fd, 0 = not a traced file */
static __thread int in_io __attribute__((tls_model("initial-exec")));

#define REAL(fn)                                                                             \
  static __typeof__(fn) *real_##fn;                                                          \
  static __typeof__(fn) *resolve_##fn(void) {                                                \
    return real_##fn = (__typeof__(fn) *)dlsym(RTLD_NEXT, #fn);                              \
  }
#define RESOLVE(fn) (real_##fn ? real_##fn : resolve_##fn())

static inline uint32_t name_of(int fd) { return fd >= 0 && fd < MAX_FDS ? fd_name[fd] : 0; }

static inline void io_rec(int op, int64_t t0, int fd, uint32_t name, int64_t bytes, int64_t off) {
  di_rec *r = di_slot();
  if (!r) return;
  *r = (di_rec){0, (uint16_t)op, -1, t0, di_ticks(), bytes, name, 0, fd, 0, off};
  di_commit(r, KIND_IO);
}

/* Intern a path (relative ones prefixed with the working directory). */
static uint32_t intern_path(int dirfd, const char *path) {
  if (!path) return 0;
  if (path[0] == '/' || dirfd != AT_FDCWD) return di_intern(path);
  char buf[4096];
  long n = syscall(SYS_getcwd, buf, sizeof buf);
  if (n <= 0) return di_intern(path);
  size_t len = strlen(buf), plen = strlen(path);
  if (len + 1 + plen >= sizeof buf) return di_intern(path);
  buf[len] = '/';
  memcpy(buf + len + 1, path, plen + 1);
  return di_intern(buf);
}

static void opened(int op, int64_t t0, int fd, int dirfd, const char *path) {
  if (fd < 0 || fd >= MAX_FDS) return;
  uint32_t id = intern_path(dirfd, path);
  fd_name[fd] = id;
  io_rec(op, t0, fd, id, -1, -1);
}

#define ACTIVE (di_enabled && !in_io)

/* open/open64/openat/openat64: the mode argument exists only with O_CREAT or O_TMPFILE. */
#define OPEN_FAMILY(fn, PARAMS, ARGS, DIRFD)                              \
  REAL(fn);                                                               \
  int fn PARAMS {                                                         \
    mode_t mode = 0;                                                      \
    if (flags & (O_CREAT | O_TMPFILE)) {                                  \
      va_list ap;                                                         \
      va_start(ap, flags);                                                \
      mode = va_arg(ap, mode_t);                                          \
      va_end(ap);                                                         \
    }                                                                     \
    if (!ACTIVE) return RESOLVE(fn) ARGS;                                 \
    in_io = 1;                                                            \
    int64_t t0 = di_ticks();                                              \
    int fd = RESOLVE(fn) ARGS;                                            \
    opened(OP_open, t0, fd, DIRFD, path);                                 \
    in_io = 0;                                                            \
    return fd;                                                            \
  }
OPEN_FAMILY(open, (const char *path, int flags, ...), (path, flags, mode), AT_FDCWD)
OPEN_FAMILY(open64, (const char *path, int flags, ...), (path, flags, mode), AT_FDCWD)
OPEN_FAMILY(openat, (int dirfd, const char *path, int flags, ...), (dirfd, path, flags, mode), dirfd)
OPEN_FAMILY(openat64, (int dirfd, const char *path, int flags, ...), (dirfd, path, flags, mode), dirfd)

#define CREAT_LIKE(fn)                                                    \
  REAL(fn);                                                               \
  int fn(const char *path, mode_t mode) {                                 \
    if (!ACTIVE) return RESOLVE(fn)(path, mode);                          \
    in_io = 1;                                                            \
    int64_t t0 = di_ticks();                                                \
    int fd = RESOLVE(fn)(path, mode);                                     \
    opened(OP_creat, t0, fd, AT_FDCWD, path);                             \
    in_io = 0;                                                            \
    return fd;                                                            \
  }
CREAT_LIKE(creat)
CREAT_LIKE(creat64)

/* A call on a descriptor: recorded when the descriptor is a traced file. */
#define FD_CALL(ret_t, fn, op, params, args, BYTES, OFF)                  \
  REAL(fn);                                                               \
  ret_t fn params {                                                       \
    uint32_t id;                                                          \
    if (!ACTIVE || !(id = name_of(fd))) return RESOLVE(fn) args;          \
    in_io = 1;                                                            \
    int64_t t0 = di_ticks();                                                \
    ret_t ret = RESOLVE(fn) args;                                         \
    io_rec(op, t0, fd, id, (BYTES), (OFF));                               \
    in_io = 0;                                                            \
    return ret;                                                           \
  }
FD_CALL(ssize_t, read, OP_read, (int fd, void *buf, size_t n), (fd, buf, n), ret, -1)
FD_CALL(ssize_t, write, OP_write, (int fd, const void *buf, size_t n), (fd, buf, n), ret, -1)
FD_CALL(ssize_t, pread, OP_pread, (int fd, void *buf, size_t n, off_t o), (fd, buf, n, o), ret, o)
FD_CALL(ssize_t, pread64, OP_pread, (int fd, void *buf, size_t n, off64_t o), (fd, buf, n, o), ret, o)
FD_CALL(ssize_t, pwrite, OP_pwrite, (int fd, const void *buf, size_t n, off_t o), (fd, buf, n, o), ret, o)
FD_CALL(ssize_t, pwrite64, OP_pwrite, (int fd, const void *buf, size_t n, off64_t o), (fd, buf, n, o), ret, o)
FD_CALL(ssize_t, readv, OP_readv, (int fd, const struct iovec *v, int n), (fd, v, n), ret, -1)
FD_CALL(ssize_t, writev, OP_writev, (int fd, const struct iovec *v, int n), (fd, v, n), ret, -1)
FD_CALL(off_t, lseek, OP_lseek, (int fd, off_t o, int whence), (fd, o, whence), -1, ret)
FD_CALL(off64_t, lseek64, OP_lseek, (int fd, off64_t o, int whence), (fd, o, whence), -1, ret)
FD_CALL(int, fsync, OP_fsync, (int fd), (fd), -1, -1)
FD_CALL(int, fdatasync, OP_fdatasync, (int fd), (fd), -1, -1)

/* close, fclose, fflush: calls without bytes; closing forgets the descriptor's name first. */
#define NAMED_CALL(fn, op, PARAM, ARG, FD_EXPR, FORGET)                          \
  REAL(fn);                                                                      \
  int fn(PARAM) {                                                                \
    uint32_t id;                                                                 \
    int fd;                                                                      \
    if (!ACTIVE || !(id = name_of(fd = (FD_EXPR)))) return RESOLVE(fn)(ARG);     \
    in_io = 1;                                                                   \
    int64_t t0 = di_ticks();                                                     \
    if (FORGET) fd_name[fd] = 0;                                                 \
    int ret = RESOLVE(fn)(ARG);                                                  \
    io_rec(op, t0, fd, id, -1, -1);                                              \
    in_io = 0;                                                                   \
    return ret;                                                                  \
  }
NAMED_CALL(close, OP_close, int d, d, d, 1)

#define MMAP_LIKE(fn, off_type)                                                           \
  REAL(fn);                                                                               \
  void *fn(void *addr, size_t len, int prot, int flags, int fd, off_type off) {           \
    uint32_t id;                                                                          \
    if (!ACTIVE || !(id = name_of(fd))) return RESOLVE(fn)(addr, len, prot, flags, fd, off); \
    in_io = 1;                                                                            \
    int64_t t0 = di_ticks();                                                                \
    void *p = RESOLVE(fn)(addr, len, prot, flags, fd, off);                               \
    io_rec(OP_mmap, t0, fd, id, p == MAP_FAILED ? -1 : (int64_t)len, (int64_t)off);        \
    in_io = 0;                                                                            \
    return p;                                                                             \
  }
MMAP_LIKE(mmap, off_t)
MMAP_LIKE(mmap64, off64_t)

/* ---- stdio ---- */
#define FOPEN_LIKE(fn)                                                    \
  REAL(fn);                                                               \
  FILE *fn(const char *path, const char *mode) {                          \
    if (!ACTIVE) return RESOLVE(fn)(path, mode);                          \
    in_io = 1;                                                            \
    int64_t t0 = di_ticks();                                                \
    FILE *f = RESOLVE(fn)(path, mode);                                    \
    if (f) opened(OP_fopen, t0, fileno_unlocked(f), AT_FDCWD, path);      \
    in_io = 0;                                                            \
    return f;                                                             \
  }
FOPEN_LIKE(fopen)
FOPEN_LIKE(fopen64)

#define STDIO_RW(fn, op, buf_t)                                                    \
  REAL(fn);                                                                        \
  size_t fn(buf_t buf, size_t size, size_t n, FILE *f) {                           \
    uint32_t id;                                                                   \
    int fd;                                                                        \
    if (!ACTIVE || !f || !(id = name_of(fd = fileno_unlocked(f)))) return RESOLVE(fn)(buf, size, n, f); \
    in_io = 1;                                                                     \
    int64_t t0 = di_ticks();                                                         \
    size_t got = RESOLVE(fn)(buf, size, n, f);                                     \
    io_rec(op, t0, fd, id, (int64_t)(got * size), -1);                             \
    in_io = 0;                                                                     \
    return got;                                                                    \
  }
STDIO_RW(fread, OP_fread, void *)
STDIO_RW(fwrite, OP_fwrite, const void *)

NAMED_CALL(fflush, OP_fflush, FILE *f, f, f ? fileno_unlocked(f) : -1, 0) /* fflush(NULL): all streams, untraced */
NAMED_CALL(fclose, OP_fclose, FILE *f, f, f ? fileno_unlocked(f) : -1, 1)

static void di_shard_child_reset(void) { di_write_header("started", -1, 0, ""); }

__attribute__((constructor)) static void di_io_start(void) {
  di_shard_init();
  di_write_header("started", -1, 0, "");
}

__attribute__((destructor)) static void di_io_stop(void) { di_write_header("exited", -1, 0, ""); }
