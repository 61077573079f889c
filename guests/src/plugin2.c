/* libunwindlab-plugin2.so: the second plugin of the `stale` guest, the
 * object ld.so maps where libunwindlab-plugin.so was (src/stale.c). Its code
 * is laid out unlike plugin.c's: other functions at other offsets, fixed
 * frames of other sizes, a mutual recursion and a loop at the bottom, so
 * plugin.c's unwind rows describe none of it. It calls nothing outside
 * itself (no PLT), so a stack sampled in it is its frames over the
 * program's. */

#define NOINLINE __attribute__((noinline))

static volatile long plugin2_sink;

/* The bottom of every stack: a loop, where most samples land. */
NOINLINE static long plugin2_spin(long n) {
    long acc = n;
    for (long i = 0; i < 400; i++) acc = acc * 6364136223846793005L + i;
    return acc;
}

NOINLINE static long plugin2_odd(long depth, long seed);

/* A big fixed frame (its CFA offset is far from anything in plugin.c). */
NOINLINE static long plugin2_even(long depth, long seed) {
    volatile long table[40];
    for (int i = 0; i < 40; i++) table[i] = seed + i;
    if (depth <= 0) return plugin2_spin(table[depth & 7]);
    long below = plugin2_odd(depth - 1, table[3]);
    plugin2_sink = table[39];
    return below ^ table[depth % 40];
}

/* A small one. */
NOINLINE static long plugin2_odd(long depth, long seed) {
    volatile long pad[3] = {seed, depth, seed ^ depth};
    if (depth <= 0) return plugin2_spin(pad[2]);
    long below = plugin2_even(depth - 1, pad[0] + 1);
    plugin2_sink = pad[1];
    return below + pad[2];
}

/* ROUNDS walks down DEPTH frames and back. */
long plugin2_work(long rounds, long depth) {
    long total = 0;
    for (long r = 0; r < rounds; r++) total += plugin2_even(depth, r) & 0xffff;
    return total;
}
