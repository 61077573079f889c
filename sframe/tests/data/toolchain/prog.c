/* A program with varied frames for checking `unwindlab sframe dump`
 * against the machine's objdump on what its gcc emits. */
#include <alloca.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static long leaf(long a, long b) { return a * b + 3; }

__attribute__((noinline)) long recurse(int depth, long acc) {
    volatile char pad[depth % 7 * 16 + 8];
    pad[0] = (char)depth;
    if (depth <= 0)
        return acc + pad[0];
    return recurse(depth - 1, acc + leaf(depth, pad[0])) + 1;
}

__attribute__((noinline)) long with_alloca(int n) {
    char *p = alloca(n + 1);
    memset(p, n, n + 1);
    long s = 0;
    for (int i = 0; i <= n; i++) s += p[i];
    return s;
}

__attribute__((noinline)) long aligned_local(int n) {
    _Alignas(64) char buf[256];
    memset(buf, n, sizeof buf);
    return buf[n & 255] + recurse(n & 3, 0);
}

__attribute__((noinline)) long sum_va(int n, ...) {
    va_list ap;
    va_start(ap, n);
    long s = 0;
    for (int i = 0; i < n; i++) s += va_arg(ap, long);
    va_end(ap);
    return s;
}

__attribute__((noinline)) long big_frame(int n) {
    long arr[1000];
    for (int i = 0; i < 1000; i++) arr[i] = i * n;
    return arr[n % 1000] + with_alloca(n & 31);
}

int main(int argc, char **argv) {
    long r = recurse(argc + 10, 0) + aligned_local(argc) + sum_va(3, 1L, 2L, 3L) + big_frame(argc);
    printf("%ld %s\n", r, argv[0] ? "ok" : "");
    return (int)(r & 1);
}
