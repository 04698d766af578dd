/* di-exec: how `di record` starts the recorded command, so that it dies with di record.
 *
 * Usage: di-exec PARENT_PID [--own-group] COMMAND ARGS...
 * Before exec'ing COMMAND (searched on PATH):
 *   - PR_SET_PDEATHSIG(SIGKILL): when di record dies (SIGKILLed by an OOM killer or a
 *     user), the kernel kills the command too, so that no rank is left orphaned and the
 *     launcher sees its process end and tears the job down. The signal fires when the
 *     thread that forked us ends: di record forks from its main thread.
 *   - if di record is already gone (getppid() != PARENT_PID), exit 137 at once;
 *   - with --own-group, become the leader of a new process group (setpgid), which
 *     signals to di record's group do not reach (di record forwards them once);
 *   - unblock every signal (di record blocks SIGINT, SIGTERM and SIGCHLD to wait for them);
 *   - LD_PRELOAD := $DI_EXEC_LD_PRELOAD (the capture shims), so that they load into the
 *     command only, never into this wrapper. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

int main(int argc, char **argv) {
  int first = 2;
  if (argc > 2 && strcmp(argv[2], "--own-group") == 0) {
    setpgid(0, 0);
    first = 3;
  }
  if (argc <= first) {
    fprintf(stderr, "usage: di-exec PARENT_PID [--own-group] COMMAND [ARGS...]\n");
    return 2;
  }
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
  if ((long)getppid() != atol(argv[1])) return 128 + SIGKILL;
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  const char *preload = getenv("DI_EXEC_LD_PRELOAD");
  if (preload) {
    if (*preload) setenv("LD_PRELOAD", preload, 1);
    unsetenv("DI_EXEC_LD_PRELOAD");
  }
  execvp(argv[first], argv + first);
  fprintf(stderr, "di record: cannot run %s: %s\n", argv[first], strerror(errno));
  return 127;
}
