/* unwindlab's guest program: one static binary, several workloads chosen
 * by argv[1], each shaped to exercise an unwinding corner case.
 *
 *   lab recurse [DEPTH]     deep recursion with varied frame sizes, alloca,
 *                           an over-aligned local (x86-64 DRAP), leaf and
 *                           tail calls
 *   lab compute [N]         a small LZ77 compressor + an expression
 *                           interpreter: a wide, real call tree
 *   lab sleep [DEPTH]       nanosleep and read(stdin) from a deep stack
 *   lab exit [DEPTH]        exit() from a deep call
 *   lab sigexit [DEPTH]     exit() from a signal handler on a deep stack
 *   lab signal [DEPTH]      a handler interrupting a deep stack, returning
 *
 * Built dynamically (-DLAB_DYNAMIC, lazy binding), two more:
 *
 *   lab lazy [DEPTH]        first calls of many libc functions from a deep
 *                           stack: each goes through the PLT into ld.so's
 *                           lazy-binding resolver once
 *   lab plugin [ROUNDS]     dlopen libunwindlab-plugin.so, call into it
 *                           (it calls back into the program and into libc),
 *                           dlclose it; ROUNDS times
 *
 * Output is deterministic (no time, no addresses). */
#include <alloca.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef LAB_DYNAMIC
#include <ctype.h>
#include <dlfcn.h>
#endif

#define NOINLINE __attribute__((noinline))

static volatile long sink;

/* ---- recurse ---------------------------------------------------------- */

NOINLINE static long leaf(long x) { return x * 3 + 1; }

NOINLINE static long tail_target(long x, int depth) { return leaf(x) + depth; }

NOINLINE static long tail_caller(long x, int depth) {
    /* A sibling call: at -O2 this is a jump, so the caller's frame is gone. */
    return tail_target(x ^ 0x55, depth);
}

NOINLINE static long with_alloca(int n) {
    char *p = alloca((size_t)n * 16 + 16);
    memset(p, n & 0x7f, (size_t)n * 16 + 16);
    long s = 0;
    for (int i = 0; i < n * 16; i += 7) s += p[i];
    return s + tail_caller(s, n);
}

NOINLINE static long with_vla(int n) {
    long v[n + 1];
    for (int i = 0; i <= n; i++) v[i] = i * n;
    return v[n / 2] + with_alloca(n % 9 + 1);
}

NOINLINE static long aligned_local(int n) {
    /* Forces stack realignment (DRAP on x86-64). */
    _Alignas(64) char buf[192];
    memset(buf, n, sizeof buf);
    return buf[n % 192] + with_vla(n % 13 + 1);
}

NOINLINE long recurse(int depth) {
    volatile signed char frame[(depth % 5) * 24 + 8];
    frame[0] = (signed char)depth;
    if (depth <= 0) return aligned_local(7) + frame[0];
    long r = recurse(depth - 1);
    if (depth % 3 == 0) r += with_vla(depth % 11 + 1);
    return r + frame[0];
}

/* ---- compute ---------------------------------------------------------- */

NOINLINE static int match_len(const unsigned char *a, const unsigned char *b, int max) {
    int n = 0;
    while (n < max && a[n] == b[n]) n++;
    return n;
}

NOINLINE static int emit_literal(unsigned char *out, int o, unsigned char c) {
    out[o++] = 0;
    out[o++] = c;
    return o;
}

NOINLINE static int emit_match(unsigned char *out, int o, int dist, int len) {
    out[o++] = (unsigned char)(1 + (len & 0x7f));
    out[o++] = (unsigned char)dist;
    return o;
}

NOINLINE static int compress(const unsigned char *in, int n, unsigned char *out) {
    int o = 0;
    for (int i = 0; i < n;) {
        int best = 0, dist = 0;
        for (int d = 1; d <= 255 && d <= i; d++) {
            int l = match_len(in + i - d, in + i, n - i < 127 ? n - i : 127);
            if (l > best) best = l, dist = d;
        }
        if (best >= 3) {
            o = emit_match(out, o, dist, best);
            i += best;
        } else {
            o = emit_literal(out, o, in[i++]);
        }
    }
    return o;
}

/* A tiny expression interpreter: recursive descent over a generated text. */
static const char *src;

NOINLINE static long expr(void);

NOINLINE static long number(void) {
    long v = 0;
    while (*src >= '0' && *src <= '9') v = v * 10 + (*src++ - '0');
    return v;
}

NOINLINE static long factor(void) {
    if (*src == '(') {
        src++;
        long v = expr();
        src++; /* ')' */
        return v;
    }
    return number();
}

NOINLINE static long term(void) {
    long v = factor();
    while (*src == '*') {
        src++;
        v = (v * factor()) % 1000003;
    }
    return v;
}

NOINLINE static long expr(void) {
    long v = term();
    while (*src == '+' || *src == '-') {
        char op = *src++;
        long t = term();
        v = op == '+' ? v + t : v - t;
    }
    return v;
}

NOINLINE static int gen_expr(char *buf, int o, int depth, unsigned *seed) {
    *seed = *seed * 1103515245u + 12345u;
    if (depth == 0 || (*seed >> 16) % 4 == 0) return o + sprintf(buf + o, "%u", (*seed >> 8) % 100);
    buf[o++] = '(';
    o = gen_expr(buf, o, depth - 1, seed);
    buf[o++] = "+-*"[(*seed >> 20) % 3];
    o = gen_expr(buf, o, depth - 1, seed);
    buf[o++] = ')';
    return o;
}

NOINLINE static long compute(int rounds) {
    static unsigned char in[4096], out[8192];
    static char text[1 << 16];
    unsigned seed = 1;
    long total = 0;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < (int)sizeof in; i++) in[i] = (unsigned char)("abcabcabd"[(i * 7 + r) % 9] + (i / 512));
        total += compress(in, sizeof in, out);
        int len = gen_expr(text, 0, 12, &seed);
        text[len] = 0;
        src = text;
        total += expr();
    }
    return total;
}

/* ---- sleep, exit, signals ---------------------------------------------- */

NOINLINE static long deep(int depth, long (*bottom)(int), int arg) {
    volatile long pad[depth % 4 + 1];
    pad[0] = depth;
    if (depth <= 0) return bottom(arg);
    return deep(depth - 1, bottom, arg) + pad[0];
}

NOINLINE static long do_sleep(int arg) {
    struct timespec ts = {0, 2000000}; /* 2 ms of virtual time */
    nanosleep(&ts, NULL);
    char buf[64];
    ssize_t n = read(0, buf, sizeof buf);
    return arg + (n > 0 ? n : 0);
}

NOINLINE static long do_exit(int arg) {
    printf("exiting from depth with %d\n", arg);
    fflush(stdout);
    exit(arg & 0x3f);
}

static volatile int handled;

static void handler_exit(int sig) {
    printf("handler %d exits\n", sig);
    fflush(stdout);
    exit(7);
}

static void handler_return(int sig) {
    handled += sig;
    sink = recurse(5);
}

NOINLINE static long do_raise(int sig) {
    raise(sig);
    return handled;
}

#ifdef LAB_DYNAMIC
/* ---- lazy binding and plugins (dynamic build only) ---------------------- */

/* Each libc function here is called for the first time from the bottom of
 * a deep stack, so its PLT slot still points at the lazy resolver. */
NOINLINE static long first_calls(int arg) {
    char buf[64];
    long total = arg;
    total += strtol("12345", NULL, 10);
    total += (long)(strchr("unwindlab", 'w') != NULL);
    total += (long)(memchr("sframe", 'a', 6) != NULL);
    total += labs(-7) + abs(-3) + atol("11");
    total += (long)strspn("aaab", "a") + (long)strcspn("xyz:", ":");
    total += (long)(strrchr("a/b/c", '/') != NULL) + (long)(strpbrk("kernel", "ne") != NULL);
    total += toupper('q') + tolower('Q');
    snprintf(buf, sizeof buf, "%d-%s", arg, "lazy");
    total += (long)strlen(buf);
    total += (long)(strstr(buf, "lazy") != NULL) + (long)strncmp(buf, "1", 1);
    return total;
}

/* What the plugin calls back: recursion in the program, under plugin frames. */
static long plugin_callback(long depth) { return recurse((int)depth + 8); }

NOINLINE static long plugin_rounds(int rounds) {
    long total = 0;
    for (int i = 0; i < rounds; i++) {
        void *lib = dlopen("libunwindlab-plugin.so", RTLD_LAZY);
        if (!lib) {
            fprintf(stderr, "lab: %s\n", dlerror());
            exit(3);
        }
        long (*work)(long, long (*)(long)) = (long (*)(long, long (*)(long)))dlsym(lib, "plugin_work");
        if (!work) {
            fprintf(stderr, "lab: %s\n", dlerror());
            exit(3);
        }
        total += work(6 + i, plugin_callback);
        dlclose(lib);
    }
    return total;
}
#endif

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "recurse";
    int n = argc > 2 ? atoi(argv[2]) : 0;
    if (!strcmp(mode, "recurse")) {
        printf("recurse %ld\n", recurse(n ? n : 200));
    } else if (!strcmp(mode, "compute")) {
        printf("compute %ld\n", compute(n ? n : 4));
    } else if (!strcmp(mode, "sleep")) {
        printf("sleep %ld\n", deep(n ? n : 40, do_sleep, 1));
    } else if (!strcmp(mode, "exit")) {
        deep(n ? n : 40, do_exit, 42);
    } else if (!strcmp(mode, "sigexit")) {
        signal(SIGUSR1, handler_exit);
        deep(n ? n : 40, do_raise, SIGUSR1);
    } else if (!strcmp(mode, "signal")) {
        signal(SIGUSR1, handler_return);
        printf("signal %ld\n", deep(n ? n : 40, do_raise, SIGUSR1));
#ifdef LAB_DYNAMIC
    } else if (!strcmp(mode, "lazy")) {
        printf("lazy %ld\n", deep(n ? n : 30, first_calls, 1));
    } else if (!strcmp(mode, "plugin")) {
        printf("plugin %ld\n", plugin_rounds(n ? n : 2));
#endif
    } else {
        fprintf(stderr, "lab: unknown mode %s\n", mode);
        return 2;
    }
    return 0;
}
