/* Deep recursion with frames of varied sizes, mutual recursion and a
   function-pointer call tree. */
#include <stdio.h>
#include <string.h>

static unsigned long deep(int depth, unsigned long acc)
{
	volatile char pad[16 + (depth % 7) * 24];
	memset((char *)pad, depth & 0xff, sizeof pad);
	if (depth == 0)
		return acc;
	return deep(depth - 1, acc * 1000003 + pad[depth % sizeof pad]) + pad[0];
}

static int is_odd(unsigned n);
static int is_even(unsigned n) { return n == 0 ? 1 : is_odd(n - 1); }
static int is_odd(unsigned n) { return n == 0 ? 0 : is_even(n - 1); }

static unsigned ack(unsigned m, unsigned n)
{
	if (m == 0)
		return n + 1;
	if (n == 0)
		return ack(m - 1, 1);
	return ack(m - 1, ack(m, n - 1));
}

typedef long (*op)(long, int);
static long add(long x, int d);
static long mul(long x, int d);
static op ops[2] = { add, mul };
static long add(long x, int d) { return d == 0 ? x + 1 : ops[d & 1](x + d, d - 1) + ops[(d + 1) & 1](x, d - 1); }
static long mul(long x, int d) { return d == 0 ? x * 3 : (ops[d & 1](x, d - 1) * 7) % 1000003; }

int main(void)
{
	printf("deep(20000) = %lu\n", deep(20000, 1));
	printf("is_even(100001) = %d\n", is_even(100001));
	printf("ack(2, 300) = %u, ack(3, 6) = %u\n", ack(2, 300), ack(3, 6));
	printf("tree = %ld\n", add(5, 18));
	return 0;
}
