/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * unwindlab's fault catcher for the kernel code it runs in user space: one
 * handler for the whole process (installed once, never unloaded), which
 * turns a SIGSEGV, SIGBUS, SIGFPE or SIGILL inside a harness call into a
 * return to that call's sigsetjmp() point, and hands every other one to
 * the handler that was there before (Rust's stack-overflow guard).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static __thread sigjmp_buf *target;
static __thread char text[160];
static struct sigaction previous[32];

static void on_fault(int sig, siginfo_t *info, void *uc)
{
	if (target) {
		sigjmp_buf *t = target;
		snprintf(text, sizeof text, "%s at address %#lx", strsignal(sig), (unsigned long)info->si_addr);
		target = NULL;
		siglongjmp(*t, 1);
	}
	struct sigaction *old = &previous[sig];
	if (old->sa_flags & SA_SIGINFO) {
		old->sa_sigaction(sig, info, uc);
	} else if (old->sa_handler != SIG_IGN && old->sa_handler != SIG_DFL) {
		old->sa_handler(sig);
	} else {
		signal(sig, SIG_DFL);
		raise(sig);
	}
}

__attribute__((constructor)) static void install(void)
{
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL };
	for (unsigned i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = on_fault;
		sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
		sigemptyset(&sa.sa_mask);
		sigaction(sigs[i], &sa, &previous[sigs[i]]);
	}
}

/* Makes t (or nothing) this thread's return point; returns the previous one. */
void *unwindlab_fault_swap(void *t)
{
	void *old = target;
	target = t;
	return old;
}

/* What the last caught fault of this thread was. */
const char *unwindlab_fault_text(void)
{
	return text;
}
