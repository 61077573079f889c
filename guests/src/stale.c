/* The stale-entry guest: dlopen libunwindlab-plugin.so, call into it,
 * dlclose it, then dlopen libunwindlab-plugin2.so, which ld.so maps at the
 * address the first plugin left (the mmap area is allocated top-down and
 * the two objects span the same number of pages), and spend a while in deep
 * stacks inside it. A loader that registers each object's .sframe and
 * forgets to unregister the first leaves an entry describing plugin.c's
 * code over plugin2.c's: the scenarios stale-after-munmap-* show what the
 * kernel's walker makes of it.
 *
 *   stale [ROUNDS]          ROUNDS walks in the second plugin (default 40)
 *
 * Output is deterministic (no time, no addresses). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

NOINLINE static long recurse(long depth) {
    volatile long frame[depth % 4 + 2];
    frame[0] = depth;
    if (depth <= 0) return frame[0] + 1;
    return recurse(depth - 1) + frame[0];
}

/* What the first plugin calls back. */
static long callback(long depth) { return recurse(depth + 6); }

static void *open_or_die(const char *name) {
    void *lib = dlopen(name, RTLD_LAZY);
    if (!lib) {
        fprintf(stderr, "stale: %s\n", dlerror());
        exit(3);
    }
    return lib;
}

static void *symbol_or_die(void *lib, const char *name) {
    void *sym = dlsym(lib, name);
    if (!sym) {
        fprintf(stderr, "stale: %s\n", dlerror());
        exit(3);
    }
    return sym;
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 40;
    void *a = open_or_die("libunwindlab-plugin.so");
    long (*work)(long, long (*)(long)) = (long (*)(long, long (*)(long)))symbol_or_die(a, "plugin_work");
    printf("plugin %ld\n", work(6, callback));
    dlclose(a);
    void *b = open_or_die("libunwindlab-plugin2.so");
    long (*work2)(long, long) = (long (*)(long, long))symbol_or_die(b, "plugin2_work");
    printf("plugin2 %ld\n", work2(rounds, 24));
    dlclose(b);
    return 0;
}
