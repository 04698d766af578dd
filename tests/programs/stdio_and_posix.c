/* File I/O through both POSIX calls and stdio, on two files, with counts a test knows (tests/test_iostats_modules.py).
 * argv[1]: file A, written with write() and read back with fread(); argv[2]: file B, written with fwrite() and read
 * back with read(). */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc != 3) return 2;
  char buf[4096];
  memset(buf, 'x', sizeof buf);
  int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0644); /* POSIX A: 3 writes of 4096 B, 1 fsync */
  for (int i = 0; i < 3; i++)
    if (write(fd, buf, 4096) != 4096) return 1;
  fsync(fd);
  close(fd);
  FILE *f = fopen(argv[1], "rb"); /* STDIO A: 2 freads of 1000 B */
  for (int i = 0; i < 2; i++)
    if (fread(buf, 1, 1000, f) != 1000) return 1;
  fclose(f);
  f = fopen(argv[2], "wb"); /* STDIO B: 5 fwrites of 200 B, 1 fflush */
  for (int i = 0; i < 5; i++)
    if (fwrite(buf, 200, 1, f) != 1) return 1;
  fflush(f);
  fclose(f);
  fd = open(argv[2], O_RDONLY); /* POSIX B: 1 read of 512 B */
  if (read(fd, buf, 512) != 512) return 1;
  close(fd);
  return 0;
}
