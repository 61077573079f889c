/* POSIX threads as glibc makes them: clone3/clone with CLONE_THREAD, TLS,
 * futexes (mutexes, condition variables, joins), per-thread signals, a
 * thread exiting while others run, fork from a thread, execve from a
 * non-leader thread, and exit() while other threads are blocked.
 *
 * The output depends on no interleaving (only the main thread prints,
 * after joins), so it can be compared with qemu-user and a native run.
 * Modes: no argument: everything (execs itself at the end); "noexec":
 * everything up to the exec, then exit(5) with blocked threads, for
 * qemu-user on foreign architectures, which cannot exec; "bomb": threads
 * until the emulator's task limit stops it; "deadlock": two threads that
 * wait for each other's mutex, and the main thread joining one. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static __thread int tls_value = 7;
static __thread char tls_name[16] = "main";

static pid_t gettid_(void) { return (pid_t)syscall(SYS_gettid); }

/* ---- workers with a mutex and a condition variable ---- */

#define ITEMS 200
#define WORKERS 4
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t more = PTHREAD_COND_INITIALIZER;
static int queue[ITEMS], head, tail, done;
static long total;

static long __attribute__((noinline)) work(int n) { return n <= 1 ? n : work(n - 1) + (n % 3); }

static void *worker(void *arg) {
  int id = (int)(long)arg;
  tls_value = 100 + id;
  snprintf(tls_name, sizeof tls_name, "worker%d", id);
  long mine = 0;
  int count = 0;
  for (;;) {
    pthread_mutex_lock(&mu);
    while (head == tail && !done) pthread_cond_wait(&more, &mu);
    if (head == tail && done) { pthread_mutex_unlock(&mu); break; }
    int item = queue[head++];
    pthread_mutex_unlock(&mu);
    long r = work(item);
    mine += r;
    count++;
    pthread_mutex_lock(&mu);
    total += r;
    pthread_mutex_unlock(&mu);
  }
  /* Whatever the others did, this thread's TLS is its own. */
  return (void *)(long)(tls_value == 100 + id && strcmp(tls_name + 6, "") != 0 && count >= 0);
}

static void workers(void) {
  pthread_t t[WORKERS];
  for (long i = 0; i < WORKERS; i++) pthread_create(&t[i], 0, worker, (void *)i);
  for (int i = 0; i < ITEMS; i++) {
    pthread_mutex_lock(&mu);
    queue[tail++] = i % 50;
    pthread_cond_signal(&more);
    pthread_mutex_unlock(&mu);
  }
  pthread_mutex_lock(&mu);
  done = 1;
  pthread_cond_broadcast(&more);
  pthread_mutex_unlock(&mu);
  int ok = 1;
  for (int i = 0; i < WORKERS; i++) {
    void *r;
    pthread_join(t[i], &r);
    ok &= (long)r == 1;
  }
  printf("workers: total %ld, tls ok %d, main tls %d %s\n", total, ok, tls_value, tls_name);
}

/* ---- a thread exiting while another runs ---- */

static volatile int spin_go;

static void *short_lived(void *arg) {
  (void)arg;
  tls_value = 1;
  pthread_exit((void *)42L);
}

static void *long_lived(void *arg) {
  (void)arg;
  long s = 0;
  for (int i = 0; i < 300; i++) s += work(40);
  return (void *)s;
}

static void exit_while_running(void) {
  pthread_t a, b;
  pthread_create(&b, 0, long_lived, 0);
  pthread_create(&a, 0, short_lived, 0);
  void *ra, *rb;
  pthread_join(a, &ra);
  pthread_join(b, &rb);
  printf("exit while running: %ld %ld\n", (long)ra, (long)rb);
}

/* ---- signals to one thread ---- */

static volatile pid_t handled_tid[3];
static volatile int handled_tls[3];
static volatile int handled;

static void handler(int sig) {
  int slot = sig == SIGUSR1 ? 0 : sig == SIGUSR2 ? 1 : 2;
  handled_tid[slot] = gettid_();
  handled_tls[slot] = tls_value;
  __atomic_add_fetch(&handled, 1, __ATOMIC_SEQ_CST);
}

static volatile pid_t target_tid;
static volatile int release;

static void *target(void *arg) {
  (void)arg;
  tls_value = 555;
  target_tid = gettid_();
  while (!release) sched_yield();
  return 0;
}

static void thread_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigaction(SIGUSR1, &sa, 0);
  sigaction(SIGUSR2, &sa, 0);
  sigaction(SIGURG, &sa, 0);
  pthread_t t;
  pthread_create(&t, 0, target, 0);
  while (!target_tid) sched_yield();
  pthread_kill(t, SIGUSR1);
  while (handled < 1) sched_yield();
  syscall(SYS_tgkill, getpid(), target_tid, SIGUSR2);
  while (handled < 2) sched_yield();
  /* A process-directed signal that only the main thread may take. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGURG);
  pthread_sigmask(SIG_BLOCK, &set, 0);
  release = 1;
  pthread_join(t, 0);
  kill(getpid(), SIGURG);
  pthread_sigmask(SIG_UNBLOCK, &set, 0);
  while (handled < 3) sched_yield();
  printf("signals: usr1 in target %d (tls %d), usr2 in target %d (tls %d), urg in main %d (tls %d)\n",
         handled_tid[0] == target_tid, handled_tls[0], handled_tid[1] == target_tid, handled_tls[1],
         handled_tid[2] == getpid(), handled_tls[2]);
}

/* ---- fork from a thread ---- */

static void *forker(void *arg) {
  (void)arg;
  fflush(stdout);
  pid_t p = fork();
  if (p == 0) {
    /* The child has one thread: this one, now its leader. */
    printf("fork child: tid is pid %d, tls %d\n", gettid_() == getpid(), tls_value);
    fflush(stdout);
    _exit(3);
  }
  int st;
  waitpid(p, &st, 0);
  return (void *)(long)WEXITSTATUS(st);
}

static void fork_from_thread(void) {
  pthread_t t;
  pthread_create(&t, 0, forker, 0);
  void *r;
  pthread_join(t, &r);
  printf("fork from thread: child status %ld\n", (long)r);
}

/* ---- exit() while other threads are blocked ---- */

static pthread_mutex_t never_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static volatile int asleep;

static void *sleeper(void *arg) {
  (void)arg;
  pthread_mutex_lock(&never_mu);
  asleep++;
  for (;;) pthread_cond_wait(&never, &never_mu);
  return 0;
}

static void exit_with_blocked_threads(int code) {
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], 0, sleeper, 0);
  for (;;) {
    pthread_mutex_lock(&never_mu);
    int n = asleep;
    pthread_mutex_unlock(&never_mu);
    if (n == 2) break;
    sched_yield();
  }
  printf("exit with 2 blocked threads: %d\n", code);
  fflush(stdout);
  exit(code);
}

/* ---- a deadlock: two threads take two mutexes in opposite orders ---- */

static pthread_mutex_t lock_a = PTHREAD_MUTEX_INITIALIZER, lock_b = PTHREAD_MUTEX_INITIALIZER;
static volatile int holds_a, holds_b;

static void *take_a_then_b(void *arg) {
  (void)arg;
  pthread_mutex_lock(&lock_a);
  holds_a = 1;
  while (!holds_b) sched_yield();
  pthread_mutex_lock(&lock_b);
  return 0;
}

static void *take_b_then_a(void *arg) {
  (void)arg;
  pthread_mutex_lock(&lock_b);
  holds_b = 1;
  while (!holds_a) sched_yield();
  pthread_mutex_lock(&lock_a);
  return 0;
}

static void deadlock(void) {
  pthread_t a, b;
  pthread_create(&a, 0, take_a_then_b, 0);
  pthread_create(&b, 0, take_b_then_a, 0);
  pthread_join(a, 0);
}

/* ---- execve from a non-leader thread ---- */

static char *self;
static pid_t leader;

static void *execer(void *arg) {
  (void)arg;
  char pid[32];
  snprintf(pid, sizeof pid, "%d", (int)getpid());
  fflush(stdout);
  char *a[] = { self, "execed", pid, 0 };
  execv("/proc/self/exe", a);
  printf("execv failed\n");
  _exit(99);
}

int main(int argc, char **argv) {
  self = argv[0];
  leader = getpid();
  if (argc > 2 && !strcmp(argv[1], "execed")) {
    printf("execed: same pid %d, tid is pid %d, tls %d\n", atoi(argv[2]) == getpid(), gettid_() == getpid(),
           tls_value);
    exit_with_blocked_threads(5);
  }
  if (argc > 1 && !strcmp(argv[1], "bomb")) {
    /* Threads that all stay alive, until the task limit stops the run. */
    pthread_mutex_lock(&never_mu);
    for (;;) {
      pthread_t t;
      if (pthread_create(&t, 0, sleeper, 0)) return 1;
    }
  }
  if (argc > 1 && !strcmp(argv[1], "deadlock")) deadlock();
  printf("main: tid is pid %d\n", gettid_() == getpid());
  workers();
  exit_while_running();
  thread_signals();
  fork_from_thread();
  if (argc > 1 && !strcmp(argv[1], "noexec")) exit_with_blocked_threads(5);
  pthread_t t;
  pthread_create(&t, 0, execer, 0);
  pthread_join(t, 0);
  printf("not reached\n");
  return 1;
}
