/* unwindlab's threaded guest: POSIX threads (glibc's pthread_create:
 * clone3/clone with CLONE_THREAD, TLS, futexes), workloads chosen by
 * argv[1], each shaped for a scenario.
 *
 *   threads workers [N]        N worker threads (default 4) take items from a
 *                              queue (a mutex and a condition variable) and
 *                              work on each in a deep call chain; joined
 *   threads thread-exit [N]    a thread calls pthread_exit from a deep stack
 *                              while two others keep computing (N rounds
 *                              at least, and until it is gone)
 *   threads exit-pending [N]   three threads compute in deep stacks, then
 *                              sleep there for good (nanosleep); a fourth
 *                              calls exit() from its own deep stack once
 *                              they all are about to (after N rounds of work)
 *   threads exec-from-thread [N]  a non-leader thread execve's
 *                              /proc/self/exe "after-exec N" from a deep
 *                              stack while another computes; the new image
 *                              works (N rounds, another call chain), prints
 *   threads two-cpus [N]       two threads computing in different deep call
 *                              chains for a while (N rounds each)
 *
 * Output is deterministic: only one thread prints at a time, at points the
 * program orders (after joins, or before the others can print at all), and
 * nothing printed depends on the interleaving (no tids, no time, no
 * addresses, no per-thread counts of shared work). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static volatile long sink;
static __thread long tls_acc;

/* ---- deep call chains with varied frames --------------------------------- */

NOINLINE static long mix(long x) {
    for (int i = 0; i < 24; i++) x = x * 6364136223846793005L + 1442695040888963407L;
    return x;
}

/* `deep`, as in lab.c: a variable-sized frame per level, a callback at the
 * bottom. */
NOINLINE static long deep(int depth, long (*bottom)(long), long arg) {
    volatile long pad[depth % 4 + 1];
    pad[0] = depth;
    if (depth <= 0) return bottom(arg);
    return deep(depth - 1, bottom, arg) + pad[0];
}

/* Two mutually recursive chains with other frame shapes. */
NOINLINE static long chain_b(long x, int depth);

NOINLINE static long chain_a(long x, int depth) {
    volatile signed char buf[40 + (depth % 3) * 24];
    buf[0] = (signed char)x;
    if (depth <= 0) return mix(x) + buf[0];
    long v = chain_b(x ^ depth, depth - 1);
    sink += v;
    return v + buf[0];
}

NOINLINE static long chain_b(long x, int depth) {
    volatile long words[(depth % 5) + 2];
    words[0] = x;
    if (depth <= 0) return mix(x + 1) ^ words[0];
    long v = chain_a(x + 3 * depth, depth - 1) ^ words[0];
    tls_acc += v & 0xff;
    return v;
}

/* A third chain, used only by the second thread of two-cpus and after exec. */
NOINLINE static long other_leaf(long x) {
    for (int i = 0; i < 30; i++) x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return x;
}

NOINLINE static long other(long x, int depth) {
    if (depth == 0) return other_leaf(x);
    long v = other(x * 3 + depth, depth - 1) + 1;
    sink ^= v;
    return v;
}

static void die(const char *what, int err) {
    fprintf(stderr, "threads: %s: %s\n", what, strerror(err));
    exit(3);
}

static pthread_t spawn(void *(*fn)(void *), void *arg) {
    pthread_t t;
    int err = pthread_create(&t, NULL, fn, arg);
    if (err) die("pthread_create", err);
    return t;
}

static void *join(pthread_t t) {
    void *ret;
    int err = pthread_join(t, &ret);
    if (err) die("pthread_join", err);
    return ret;
}

/* ---- workers: a work queue ------------------------------------------------ */

#define ITEMS 96
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t more = PTHREAD_COND_INITIALIZER;
static int queue[ITEMS], head, tail, closed;
static long results[ITEMS];

NOINLINE static long item_bottom(long item) { return chain_a(item * 7 + 1, 10 + (int)(item % 9)); }

static void *worker(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&mu);
        while (head == tail && !closed) pthread_cond_wait(&more, &mu);
        if (head == tail) {
            pthread_mutex_unlock(&mu);
            return NULL;
        }
        int item = queue[head++];
        pthread_mutex_unlock(&mu);
        long r = deep(8 + item % 13, item_bottom, item);
        results[item] = r; /* each item is one thread's, whichever */
    }
}

static int workers(int n) {
    if (n < 1 || n > 64) n = 4;
    pthread_t t[64];
    for (int i = 0; i < n; i++) t[i] = spawn(worker, NULL);
    for (int i = 0; i < ITEMS; i++) {
        pthread_mutex_lock(&mu);
        queue[tail++] = i;
        pthread_cond_signal(&more);
        pthread_mutex_unlock(&mu);
    }
    pthread_mutex_lock(&mu);
    closed = 1;
    pthread_cond_broadcast(&more);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < n; i++) join(t[i]);
    unsigned long sum = 0;
    for (int i = 0; i < ITEMS; i++) sum = sum * 31 + (unsigned long)results[i];
    printf("workers %d items %d taken %d checksum %lx\n", n, ITEMS, head, sum);
    return 0;
}

/* Threads that must be running before a workload's main event count
 * themselves in `busy`. */
static pthread_mutex_t busy_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t busy_cv = PTHREAD_COND_INITIALIZER;
static int busy;

static void started(void) {
    pthread_mutex_lock(&busy_mu);
    busy++;
    pthread_cond_broadcast(&busy_cv);
    pthread_mutex_unlock(&busy_mu);
}

static void wait_started(int n) {
    pthread_mutex_lock(&busy_mu);
    while (busy < n) pthread_cond_wait(&busy_cv, &busy_mu);
    pthread_mutex_unlock(&busy_mu);
}

/* ---- thread-exit: pthread_exit from a deep stack while others compute ----- */

/* Set by the main thread once it has joined the exiting thread: the
 * computers run through its whole exit (glibc's forced unwind of its stack,
 * then the exit system call). */
static volatile int exited;

NOINLINE static long exit_bottom(long arg) {
    pthread_exit((void *)arg);
}

static void *exiter(void *arg) {
    wait_started(2);
    chain_a((long)arg, 6);
    deep(30, exit_bottom, 42);
    return NULL; /* not reached */
}

static void *computer(void *arg) {
    long rounds = (long)arg >> 8, which = (long)arg & 0xff;
    long s = 0;
    started();
    /* Keep computing at least until the exiting thread is gone (joined). */
    for (long i = 0; i < rounds || !exited; i++) s += chain_a(i + which, 14);
    return (void *)(long)(s != 0);
}

static int thread_exit(int n) {
    long rounds = n > 0 ? n : 40;
    pthread_t a = spawn(computer, (void *)(rounds << 8 | 1));
    pthread_t b = spawn(computer, (void *)(rounds << 8 | 2));
    pthread_t e = spawn(exiter, (void *)5L);
    long ret = (long)join(e);
    exited = 1;
    long ra = (long)join(a), rb = (long)join(b);
    printf("thread-exit: exited with %ld, computers %ld %ld\n", ret, ra, rb);
    return 0;
}

/* ---- exit-pending: exit() while the other threads sleep in the kernel ---- */

/* Each thread computes, then sleeps in nanosleep() from the bottom of its
 * deep stack until the process ends: a profiler's request taken as it
 * enters the call is still pending when exit() kills it (the lab's
 * `exit-group-many-pending` scenario). */
NOINLINE static long sleep_bottom(long which) {
    long s = 0;
    for (long i = 0; i < 4 + which; i++) s += chain_a(i + which, 12);
    sink += s;
    started();
    for (;;) {
        struct timespec ts = {100000, 0};
        nanosleep(&ts, NULL);
    }
    return 0; /* not reached */
}

static void *sleeper(void *arg) {
    deep(20 + (int)(long)arg * 3, sleep_bottom, (long)arg);
    return NULL;
}

static int rounds_before_exit;

NOINLINE static long exit_now(long code) {
    long s = 0;
    for (int i = 0; i < rounds_before_exit; i++) s += chain_b(i, 12);
    sink += s;
    printf("exit-pending: exiting with %ld while %d threads sleep\n", code, busy);
    fflush(stdout);
    exit((int)code);
}

static void *exit_caller(void *arg) {
    wait_started(3);
    deep(25, exit_now, (long)arg);
    return NULL;
}

static int exit_pending(int n) {
    rounds_before_exit = n > 0 ? n : 20;
    for (long i = 0; i < 3; i++) spawn(sleeper, (void *)i);
    pthread_t e = spawn(exit_caller, (void *)7L);
    join(e); /* never returns: exit_caller exits the process */
    return 1;
}

/* ---- exec-from-thread ----------------------------------------------------- */

static int exec_rounds;
static char *self_argv0;

NOINLINE static long exec_bottom(long arg) {
    long s = 0;
    for (int i = 0; i < exec_rounds; i++) s += chain_b(i + arg, 10);
    sink += s;
    char rounds[16];
    snprintf(rounds, sizeof rounds, "%d", exec_rounds);
    char *argv[] = {self_argv0, "after-exec", rounds, NULL};
    printf("exec-from-thread: a thread execs\n");
    fflush(stdout);
    execv("/proc/self/exe", argv);
    perror("threads: execv");
    exit(4);
}

static void *exec_thread(void *arg) {
    wait_started(1);
    deep(20, exec_bottom, (long)arg);
    return NULL;
}

static void *busy_forever(void *arg) {
    started();
    for (long i = 0;; i++) sink += chain_a(i + (long)arg, 12);
    return NULL;
}

static int exec_from_thread(char *argv0, int n) {
    exec_rounds = n > 0 ? n : 10;
    self_argv0 = argv0;
    spawn(busy_forever, (void *)1L);
    pthread_t e = spawn(exec_thread, (void *)2L);
    join(e); /* never returns: the exec replaces the process */
    return 1;
}

static int after_exec(int n) {
    int rounds = n > 0 ? n : 10;
    long s = 0;
    for (int i = 0; i < rounds; i++) s += other(i, 24);
    sink += s;
    printf("after-exec: %d rounds, %04lx\n", rounds, (unsigned long)s & 0xffff);
    return 0;
}

/* ---- two-cpus: two threads in different chains ---------------------------- */

static void *two_a(void *arg) {
    long rounds = (long)arg, s = 0;
    for (long i = 0; i < rounds; i++) s += chain_a(i, 18);
    return (void *)(unsigned long)(s & 0xffff);
}

static void *two_b(void *arg) {
    long rounds = (long)arg, s = 0;
    for (long i = 0; i < rounds; i++) s += other(i, 30) + deep(12, mix, i);
    return (void *)(unsigned long)(s & 0xffff);
}

static int two_cpus(int n) {
    long rounds = n > 0 ? n : 400;
    pthread_t a = spawn(two_a, (void *)rounds);
    pthread_t b = spawn(two_b, (void *)rounds);
    long ra = (long)join(a), rb = (long)join(b);
    printf("two-cpus: %ld rounds, %04lx %04lx\n", rounds, ra, rb);
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "workers";
    int n = argc > 2 ? atoi(argv[2]) : 0;
    if (!strcmp(mode, "workers")) return workers(n);
    if (!strcmp(mode, "thread-exit")) return thread_exit(n);
    if (!strcmp(mode, "exit-pending")) return exit_pending(n);
    if (!strcmp(mode, "exec-from-thread")) return exec_from_thread(argv[0], n);
    if (!strcmp(mode, "after-exec")) return after_exec(n);
    if (!strcmp(mode, "two-cpus")) return two_cpus(n);
    fprintf(stderr, "threads: unknown mode %s\n", mode);
    return 2;
}
