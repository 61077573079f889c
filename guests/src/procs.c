/* unwindlab's multi-process guest: processes that fork, exec and talk
 * through pipes while perf samples them, chosen by argv[1].
 *
 *   procs fork [N]       work, fork (the scenario keeps the call in the
 *                        kernel), both work, the parent waits
 *   procs exec [N]       work, then execve of itself as "after-exec":
 *                        a different deep call chain in the new image
 *   procs pipeline [N]   three processes, producer | filter | consumer,
 *                        connected by pipes; the filter is exec'd
 *
 * Output is deterministic (no pids, no time, no addresses). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static volatile long sink;

/* A deep call chain doing real work, so samples land at every depth. */
NOINLINE static long churn_leaf(long x) {
    for (int i = 0; i < 40; i++) x = x * 6364136223846793005L + 1442695040888963407L;
    return x;
}

NOINLINE static long churn(long x, int depth) {
    if (depth == 0) return churn_leaf(x);
    long v = churn(x + depth, depth - 1);
    sink += v;
    return v ^ depth;
}

NOINLINE static long work(int rounds, int depth) {
    long s = 0;
    for (int i = 0; i < rounds; i++) s += churn(i, depth);
    return s;
}

/* After exec: a chain with other functions, so the new image's frames differ. */
NOINLINE static long second_leaf(long x) {
    for (int i = 0; i < 30; i++) x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return x;
}

NOINLINE static long second(long x, int depth) {
    if (depth == 0) return second_leaf(x);
    long v = second(x * 3 + depth, depth - 1) + 1;
    sink ^= v;
    return v;
}

static int rounds(int argc, char **argv, int i, int dflt) {
    return argc > i ? atoi(argv[i]) : dflt;
}

static int do_fork(int n) {
    work(n, 12);
    pid_t child = fork();
    if (child < 0) return 1;
    if (child == 0) {
        work(n, 8);
        printf("child done\n");
        fflush(stdout);
        _exit(3);
    }
    work(n, 10);
    int status;
    if (waitpid(child, &status, 0) != child) return 1;
    printf("parent done, child exited %d\n", WEXITSTATUS(status));
    return 0;
}

static int do_exec(int n, char *self) {
    work(n, 12);
    char count[16];
    snprintf(count, sizeof count, "%d", n);
    char *args[] = {self, "after-exec", count, NULL};
    execv("/proc/self/exe", args);
    return 1;
}

static int after_exec(int n) {
    long s = 0;
    for (int i = 0; i < n; i++) s += second(i, 14);
    sink = s;
    printf("after exec\n");
    return 0;
}

/* producer: numbers as text lines */
static void producer(int out, int n) {
    FILE *f = fdopen(out, "w");
    for (int i = 0; i < n; i++) fprintf(f, "%ld\n", (long)(work(1, 6 + i % 5) & 0xffff));
    fclose(f);
}

/* filter (exec'd): each line transformed by a deep computation */
static int filter(void) {
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        long v = atol(line);
        printf("%ld\n", (second(v, 8) & 0xff) + v % 7);
    }
    return 0;
}

/* consumer: sums what arrives */
static void consumer(int in) {
    FILE *f = fdopen(in, "r");
    char line[64];
    long sum = 0, lines = 0;
    while (fgets(line, sizeof line, f)) {
        sum += atol(line) + churn(lines, 4) % 2;
        lines++;
    }
    printf("consumer: %ld lines, sum %ld\n", lines, sum);
    fflush(stdout);
}

static int do_pipeline(int n, char *self) {
    int a[2], b[2];
    if (pipe(a) || pipe(b)) return 1;
    pid_t p1 = fork();
    if (p1 == 0) {
        close(a[0]), close(b[0]), close(b[1]);
        producer(a[1], n);
        _exit(0);
    }
    pid_t p2 = fork();
    if (p2 == 0) {
        dup2(a[0], 0), dup2(b[1], 1);
        close(a[0]), close(a[1]), close(b[0]), close(b[1]);
        char *args[] = {self, "filter", NULL};
        execv("/proc/self/exe", args);
        _exit(127);
    }
    pid_t p3 = fork();
    if (p3 == 0) {
        close(a[0]), close(a[1]), close(b[1]);
        consumer(b[0]);
        _exit(0);
    }
    close(a[0]), close(a[1]), close(b[0]), close(b[1]);
    int ok = 0, status;
    for (int i = 0; i < 3; i++)
        if (wait(&status) > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) ok++;
    printf("pipeline: %d of 3 stages succeeded\n", ok);
    return ok == 3 ? 0 : 1;
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "";
    if (!strcmp(what, "fork")) return do_fork(rounds(argc, argv, 2, 20));
    if (!strcmp(what, "exec")) return do_exec(rounds(argc, argv, 2, 20), argv[0]);
    if (!strcmp(what, "after-exec")) return after_exec(rounds(argc, argv, 2, 20));
    if (!strcmp(what, "pipeline")) return do_pipeline(rounds(argc, argv, 2, 40), argv[0]);
    if (!strcmp(what, "filter")) return filter();
    fprintf(stderr, "usage: procs fork|exec|pipeline [N]\n");
    return 2;
}
