/* Signal delivery: handlers run on a real signal frame (with and without
   SA_SIGINFO, on the normal and the alternate stack), the blocked mask
   holds a signal back until it is unblocked, ignored and default
   dispositions, and registers survive the handler. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t hits, last_sig, last_code;
static volatile long depth_at_signal;
static char altstack[65536];

static void plain(int sig)
{
	hits++;
	last_sig = sig;
}

static void with_info(int sig, siginfo_t *info, void *uc)
{
	hits++;
	last_sig = sig;
	last_code = info->si_code;
	char local;
	/* Is the handler running on the alternate stack? */
	depth_at_signal = (&local >= altstack && &local < altstack + sizeof altstack);
	(void)uc;
	/* Use floating point and stdio inside the handler. */
	char buf[64];
	snprintf(buf, sizeof buf, "  in handler: %d %.3f\n", sig, sig * 1.5);
	write(1, buf, strlen(buf));
}

static double work(int n, double x)
{
	if (n == 0) {
		raise(SIGUSR1);
		return x;
	}
	return work(n - 1, x * 1.0001) + 0.5;
}

int main(void)
{
	signal(SIGUSR2, plain);
	raise(SIGUSR2);
	printf("plain handler: hits=%d sig=%d\n", hits, last_sig);

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = with_info;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGUSR1, &sa, NULL);
	double r = work(50, 1.0);
	printf("siginfo handler: hits=%d sig=%d code=%d on_altstack=%ld result=%.6f\n", hits, last_sig, last_code,
	       depth_at_signal, r);

	stack_t ss = { .ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0 };
	sigaltstack(&ss, NULL);
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigaction(SIGUSR1, &sa, NULL);
	kill(getpid(), SIGUSR1);
	printf("altstack handler: hits=%d on_altstack=%ld\n", hits, depth_at_signal);

	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	sigprocmask(SIG_BLOCK, &set, &old);
	raise(SIGUSR2);
	printf("blocked: hits=%d\n", hits);
	sigprocmask(SIG_SETMASK, &old, NULL);
	printf("unblocked: hits=%d\n", hits);

	signal(SIGUSR2, SIG_IGN);
	raise(SIGUSR2);
	signal(SIGCHLD, SIG_DFL);
	raise(SIGCHLD);
	printf("ignored: hits=%d\n", hits);

	fflush(stdout);
	signal(SIGTERM, SIG_DFL);
	raise(SIGTERM);
	printf("not reached\n");
	return 0;
}
