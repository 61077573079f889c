/* libunwindlab-plugin.so: the library the dynamic guest's `plugin` workload
 * dlopens. Its frames sit between the program's: plugin_work is called
 * through a dlsym pointer, recurses, calls into libc through its own PLT
 * (lazily bound on each load) and calls back into the program. */
#include <stdio.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

static volatile long plugin_sink;

NOINLINE static long plugin_leaf(const char *s, long depth) {
    char buf[32];
    snprintf(buf, sizeof buf, "%s%ld", s, depth);
    return (long)strlen(buf) + depth;
}

NOINLINE static long plugin_recurse(long depth, long (*callback)(long)) {
    volatile long pad[depth % 3 + 1];
    pad[0] = depth;
    if (depth <= 0) return callback(depth);
    long below = plugin_recurse(depth - 1, callback);
    plugin_sink = pad[0];
    return below + plugin_leaf("plugin", depth);
}

long plugin_work(long depth, long (*callback)(long)) { return plugin_recurse(depth, callback); }
