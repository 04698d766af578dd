"""File I/O from 3 threads and a forked child, for the POSIX-I/O shim tests.

Thread k writes k+1 chunks of 512 bytes to DIR/thread-k.dat with os.write; then
the process forks and the child writes 3 x 100 bytes to DIR/child.dat through
stdio (a C-level fwrite via ctypes), the parent reads DIR/thread-0.dat with
pread. Usage: python io_threads_fork.py DIR
"""

import ctypes
import os
import sys
import threading

out = sys.argv[1]


def work(k: int) -> None:
    fd = os.open(os.path.join(out, f"thread-{k}.dat"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for _ in range(k + 1):
        os.write(fd, b"t" * 512)
    os.close(fd)


threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()

pid = os.fork()
if pid == 0:
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.fwrite.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    f = libc.fopen(os.path.join(out, "child.dat").encode(), b"wb")
    for _ in range(3):
        libc.fwrite(b"c" * 100, 1, 100, f)
    libc.fclose(f)
    sys.exit(0)  # a normal exit: the child's shard header says "exited"
os.waitpid(pid, 0)
fd = os.open(os.path.join(out, "thread-0.dat"), os.O_RDONLY)
assert len(os.pread(fd, 4096, 0)) == 512
os.close(fd)
