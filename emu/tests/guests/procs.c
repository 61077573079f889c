/* Processes: fork, wait, pipes, SIGPIPE, kill, SIGCHLD, sleeping children,
 * posix_spawn, fork+exec, vfork+exec of itself. Also the hostile modes the
 * limits must stop: "bomb" (a fork bomb), "hog" (allocates until refused),
 * "spin" (never ends), "deadlock" (reads a pipe only it could write). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <signal.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
extern char **environ;
static volatile int chld;
static void on_chld(int s) { (void)s; chld++; }
int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "child")) { printf("exec'd child %s\n", argc > 2 ? argv[2] : "-"); return 7; }
  if (argc > 1 && !strcmp(argv[1], "bomb")) { for (;;) fork(); }
  if (argc > 1 && !strcmp(argv[1], "hog")) { int n = 0; while (n < 1000 && malloc(16 << 20)) n++; printf("%d chunks\n", n); return 0; }
  if (argc > 1 && !strcmp(argv[1], "spin")) { for (;;) __asm__ volatile(""); }
  if (argc > 1 && !strcmp(argv[1], "deadlock")) { int d[2]; char c; pipe(d); return (int)read(d[0], &c, 1); }
  pid_t me = getpid();
  setvbuf(stdout, NULL, _IONBF, 0);
  /* fork + wait */
  pid_t p = fork();
  if (p == 0) { printf("in child, getppid() is the parent: %d\n", getppid() == me); _exit(3); }
  int st; pid_t w = waitpid(p, &st, 0);
  printf("waited %d: exited=%d code=%d\n", w == p, WIFEXITED(st), WEXITSTATUS(st));
  /* pipe child->parent, big write */
  int fd[2]; pipe(fd);
  p = fork();
  if (p == 0) { close(fd[0]); static char buf[200000]; memset(buf, 'x', sizeof buf); size_t off = 0; while (off < sizeof buf) { ssize_t n = write(fd[1], buf + off, sizeof buf - off); if (n <= 0) _exit(9); off += n; } _exit(0); }
  close(fd[1]);
  long total = 0; char b[4096]; ssize_t n;
  struct pollfd pf = { fd[0], POLLIN, 0 };
  while (poll(&pf, 1, -1) > 0 && (n = read(fd[0], b, sizeof b)) > 0) total += n;
  waitpid(p, &st, 0);
  printf("read %ld bytes through a pipe, child status %d\n", total, WEXITSTATUS(st));
  /* SIGPIPE */
  pipe(fd); close(fd[0]);
  p = fork();
  if (p == 0) { write(fd[1], "x", 1); _exit(0); }
  close(fd[1]);
  waitpid(p, &st, 0);
  printf("writer to closed pipe: signaled=%d sig=%d\n", WIFSIGNALED(st), WTERMSIG(st));
  /* kill a sleeping child; SIGCHLD handler */
  signal(SIGCHLD, on_chld);
  p = fork();
  if (p == 0) { for (;;) pause(); }
  kill(p, SIGTERM);
  waitpid(p, &st, 0);
  printf("killed child: signaled=%d sig=%d chld=%d\n", WIFSIGNALED(st), WTERMSIG(st), chld);
  /* sleep in child, parent waits */
  p = fork();
  if (p == 0) { struct timespec ts = {0, 5000000}; nanosleep(&ts, 0); _exit(4); }
  waitpid(p, &st, 0);
  printf("sleeper code %d\n", WEXITSTATUS(st));
  /* exec via posix_spawn and via fork+exec */
  if (argc > 1 && !strcmp(argv[1], "noexec")) return 0;
  char *args[] = { argv[0], "child", "spawned", 0 };
  posix_spawn(&p, "/proc/self/exe", 0, 0, args, environ);
  waitpid(p, &st, 0);
  printf("spawned code %d\n", WEXITSTATUS(st));
  p = fork();
  if (p == 0) { char *a[] = { argv[0], "child", "forked", 0 }; execv("/proc/self/exe", a); _exit(99); }
  waitpid(p, &st, 0);
  printf("fork+exec code %d\n", WEXITSTATUS(st));
  p = vfork();
  if (p == 0) { char *a[] = { argv[0], "child", "vforked", 0 }; execv("/proc/self/exe", a); _exit(99); }
  waitpid(p, &st, 0);
  printf("vfork+exec code %d\n", WEXITSTATUS(st));
  printf("no children left: %d\n", wait(&st) == -1);
  return 0;
}
