/* Control flow the ground-truth stack must follow: longjmp out of a deep
   recursion, and a tail call through a function pointer. */
#include <setjmp.h>
#include <stdio.h>

static jmp_buf env;
static volatile int sink;

__attribute__((noinline)) void after_longjmp(int x) { sink += x; }

__attribute__((noinline)) int dive(int n)
{
	volatile int pad[3] = { n, n, n };
	if (n == 0)
		longjmp(env, 1);
	return dive(n - 1) + pad[n % 3];
}

__attribute__((noinline)) int tail_target(int x) { return x * 2 + sink; }

/* At -O2 a sibling call through a pointer: an indirect jump. */
__attribute__((noinline)) int tail_indirect(int (*volatile *f)(int), int x) { return (*f)(x + 1); }

static int (*volatile target)(int) = tail_target;

int main(void)
{
	if (setjmp(env) == 0)
		dive(30);
	else
		after_longjmp(1);
	printf("%d\n", tail_indirect(&target, 20));
	return 0;
}
