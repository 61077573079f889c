/* The threaded scenarios' guest until guests/src/threads.c (branch
 * tguests) is on main: workloads thread-exit, exit-pending,
 * exec-from-thread, two-cpus. Built as tests/guests/bin/ARCH/threads-lab-v3:
 *   CC -O2 -static -pthread -Wall -fno-ident -o threads-o2 threads-lab.c
 *   unwindlab sframe gen threads-o2 --inject -o threads-lab-v3
 * (CC: gcc, aarch64-linux-gnu-gcc, s390x-linux-gnu-gcc). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long __attribute__((noinline)) leaf(long n) { return n * 3 + 1; }
static long __attribute__((noinline)) rec(int d, long n) {
  if (d == 0) return leaf(n);
  long r = rec(d - 1, n + d);
  return r + (r & 7);
}
static long __attribute__((noinline)) spin(int rounds, int depth) {
  long s = 0;
  for (int i = 0; i < rounds; i++) s += rec(depth, i);
  return s;
}

static void *t_exit_worker(void *a) {
  (void)a;
  long s = spin(200, 12);
  return (void *)s;
}
static int thread_exit(void) {
  pthread_t t;
  pthread_create(&t, 0, t_exit_worker, 0);
  long s = spin(400, 14);
  void *r;
  pthread_join(t, &r);
  printf("thread-exit %ld %ld\n", s, (long)r);
  return 0;
}

static void __attribute__((noinline)) sleep_forever(void) {
  struct timespec ts = {100000, 0};
  nanosleep(&ts, 0);
}
static void *pending_worker(void *a) {
  spin(50 * (int)(long)a, 10);
  sleep_forever();
  return 0;
}
static int exit_pending(void) {
  pthread_t t[3];
  for (long i = 0; i < 3; i++) pthread_create(&t[i], 0, pending_worker, (void *)(i + 1));
  long s = spin(800, 12);
  printf("exit-pending %ld\n", s);
  fflush(stdout);
  exit(3);
}

static char *self_path;
static void *exec_worker(void *a) {
  (void)a;
  spin(300, 12);
  char *args[] = {self_path, "after-exec", NULL};
  execv("/proc/self/exe", args);
  return 0;
}
static int exec_from_thread(char *self) {
  self_path = self;
  pthread_t t;
  pthread_create(&t, 0, exec_worker, 0);
  pthread_join(t, 0);
  return 1;
}
static long __attribute__((noinline)) after2(long n) { return spin(200, 9) + n; }
static int after_exec(void) {
  printf("after exec %ld\n", after2(1));
  return 0;
}

static void *two_worker(void *a) {
  (void)a;
  return (void *)spin(1500, 13);
}
static int two_cpus(void) {
  pthread_t t;
  pthread_create(&t, 0, two_worker, 0);
  long s = spin(1500, 11);
  void *r;
  pthread_join(t, &r);
  printf("two-cpus %ld %ld\n", s, (long)r);
  return 0;
}

int main(int argc, char **argv) {
  const char *w = argc > 1 ? argv[1] : "two-cpus";
  if (!strcmp(w, "thread-exit")) return thread_exit();
  if (!strcmp(w, "exit-pending")) return exit_pending();
  if (!strcmp(w, "exec-from-thread")) return exec_from_thread(argv[0]);
  if (!strcmp(w, "after-exec")) return after_exec();
  if (!strcmp(w, "two-cpus")) return two_cpus();
  fprintf(stderr, "unknown workload %s\n", w);
  return 2;
}
