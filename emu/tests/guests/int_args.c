/* System-call arguments of C type int or unsigned int: the kernel uses only
   the low 32 bits of the register (sign-extending an int), so junk in the
   upper half changes nothing. glibc's syscall() passes longs, so J(x) puts
   junk above a 32-bit value; every call below would fail (EBADF, EINVAL)
   if the junk were taken into account. Each line shows a result and the
   error name. Relative paths name "Cargo.toml", which the test runs beside
   (and provides to the emulator). Exits with status 5. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define JUNK 0xdeadbeef00000000UL
#define J(x) (JUNK | (unsigned int)(x))

static volatile sig_atomic_t usr1, usr2;

static void on_usr1(int sig)
{
	(void)sig;
	usr1++;
}

static void on_usr2(int sig)
{
	(void)sig;
	usr2++;
}

static const char *error_name(int e)
{
	switch (e) {
	case ENOENT: return "ENOENT";
	case EBADF: return "EBADF";
	case ENOTDIR: return "ENOTDIR";
	case EINVAL: return "EINVAL";
	case ESRCH: return "ESRCH";
	case EFAULT: return "EFAULT";
	default: return "other";
	}
}

/* Prints "what: ok" (or the value, if show) or "what: -1 ENAME". */
static long report(const char *what, long r, int show)
{
	if (r < 0)
		printf("%s: -1 %s\n", what, error_name(errno));
	else if (show)
		printf("%s: %ld\n", what, r);
	else
		printf("%s: ok\n", what);
	errno = 0;
	return r;
}

int main(void)
{
	/* The case: glibc's own AT_FDCWD, then one with junk. */
	report("open missing", open("missing-relative-path", O_RDONLY), 1);
	report("openat junk AT_FDCWD missing",
	       syscall(SYS_openat, J(AT_FDCWD), "missing-relative-path", J(O_RDONLY)), 1);
	long fd = report("openat junk AT_FDCWD", syscall(SYS_openat, J(AT_FDCWD), "Cargo.toml", J(O_RDONLY)), 0);
	report("openat junk stdin dirfd", syscall(SYS_openat, J(0), "Cargo.toml", J(O_RDONLY)), 1);
	report("openat junk closed dirfd", syscall(SYS_openat, J(1000000), "Cargo.toml", J(O_RDONLY)), 1);

	char buf[10] = { 0 };
	report("read junk fd", syscall(SYS_read, J(fd), buf, 9), 1);
	printf("read: %s\n", buf);
	report("lseek junk whence", syscall(SYS_lseek, J(fd), 0L, J(SEEK_END)), 0);
	report("fcntl junk cmd", syscall(SYS_fcntl, J(fd), J(F_GETFD)), 1);
	/* The lowest new descriptor is an int taken from an unsigned long. The
	   result depends on what the test harness left open: the emulator has
	   nothing there, so gives 500. */
	long dup = syscall(SYS_fcntl, J(fd), J(F_DUPFD), J(500));
	printf("fcntl dupfd junk: %d\n", dup >= 500);
	report("close junk fd", syscall(SYS_close, J(dup)), 1);
	report("close again", syscall(SYS_close, J(dup)), 1);
	struct stat st;
	report("newfstatat junk", syscall(SYS_newfstatat, J(AT_FDCWD), "Cargo.toml", &st, J(0)), 1);
	printf("regular: %d\n", S_ISREG(st.st_mode));
	report("close junk fd", syscall(SYS_close, J(fd)), 1);

	fflush(stdout);
	report("write junk fd", syscall(SYS_write, J(1), "raw write\n", 10L), 1);

	/* Signals: junk above the signal number, the pid and `how`. */
	signal(SIGUSR1, on_usr1);
	signal(SIGUSR2, on_usr2);
	unsigned long old[4] = { 0 };
	report("rt_sigaction junk sig", syscall(SYS_rt_sigaction, J(SIGUSR1), NULL, old, 8L), 1);
	printf("handler kept: %d\n", old[0] == (unsigned long)on_usr1);
	report("kill junk", syscall(SYS_kill, J(getpid()), J(SIGUSR1)), 1);
	printf("usr1: %d\n", usr1);
	report("tgkill junk", syscall(SYS_tgkill, J(getpid()), J(syscall(SYS_gettid)), J(SIGUSR2)), 1);
	printf("usr2: %d\n", usr2);
	report("kill signal 0 with junk", syscall(SYS_kill, J(getpid()), J(0)), 1);
	report("kill signal 65", syscall(SYS_kill, J(getpid()), J(65)), 1);
	sigset_t set, cur;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	report("rt_sigprocmask junk how", syscall(SYS_rt_sigprocmask, J(SIG_BLOCK), &set, NULL, 8L), 1);
	sigprocmask(SIG_BLOCK, NULL, &cur);
	printf("usr1 blocked: %d\n", sigismember(&cur, SIGUSR1));
	report("rt_sigprocmask junk unblock", syscall(SYS_rt_sigprocmask, J(SIG_UNBLOCK), &set, NULL, 8L), 1);

	/* Clocks, limits, futexes. */
	struct timespec ts;
	report("clock_gettime junk clock", syscall(SYS_clock_gettime, J(CLOCK_MONOTONIC), &ts), 1);
	struct rlimit rl;
	report("prlimit64 junk", syscall(SYS_prlimit64, J(0), J(RLIMIT_NOFILE), NULL, &rl), 1);
	int word = 0;
	report("futex junk op", syscall(SYS_futex, &word, J(FUTEX_WAKE), J(1), NULL, NULL, 0L), 1);

	fflush(stdout);
	syscall(SYS_exit_group, J(5));
	return 1;
}
