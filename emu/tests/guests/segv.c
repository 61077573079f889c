/* A fault deep in a call chain caught by a SIGSEGV handler, which walks the
   stack back through the signal frame with backtrace() and then exits from
   inside the handler. Only addresses inside the program's own functions are
   printed, as offsets from the function they are in, so the output does not
   depend on where the emulator puts the stack or the sigreturn trampoline. */
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static char *target;

#define LEVEL(name, next)                                                                \
	__attribute__((noinline)) int name(int n)                                        \
	{                                                                                \
		volatile int pad[4] = { n, n + 1, n + 2, n + 3 };                        \
		return next(n + 1) + pad[n & 3];                                         \
	}

__attribute__((noinline)) int fault(int n)
{
	target[n & 1 ? 0 : 0] = (char)n; /* the page is read-only */
	return n;
}
LEVEL(level3, fault)
LEVEL(level2, level3)
LEVEL(level1, level2)

static const struct {
	const char *name;
	void *start;
} functions[] = {
	{ "fault", (void *)fault },
	{ "level3", (void *)level3 },
	{ "level2", (void *)level2 },
	{ "level1", (void *)level1 },
	{ "main", NULL },
};

int main(void);

static void describe(void *pc)
{
	const char *best = NULL;
	unsigned long best_off = 0;
	for (unsigned i = 0; i < sizeof functions / sizeof functions[0]; i++) {
		unsigned long start = (unsigned long)(functions[i].start ? functions[i].start : (void *)main);
		unsigned long off = (unsigned long)pc - start;
		if ((unsigned long)pc >= start && off < 0x400 && (!best || off < best_off)) {
			best = functions[i].name;
			best_off = off;
		}
	}
	if (best)
		printf("  %s\n", best);
}

static void handler(int sig, siginfo_t *info, void *uc)
{
	(void)uc;
	printf("caught signal %d, code %d, at the target page: %s\n", sig, info->si_code,
	       info->si_addr == target ? "yes" : "no");
	void *frames[32];
	int n = backtrace(frames, 32);
	printf("backtrace through the signal frame (%s):\n", n > 4 ? "deep" : "shallow");
	for (int i = 0; i < n; i++)
		describe(frames[i]);
	fflush(stdout);
	exit(42);
}

int main(void)
{
	target = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (target == MAP_FAILED)
		return 1;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGSEGV, &sa, NULL);
	printf("about to fault\n");
	return level1(1);
}
