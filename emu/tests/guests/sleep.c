/* Sleeping and clocks: the guest checks durations against what it asked
   for, so the output is the same on any clock that does not run backwards. */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static long long ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(void)
{
	long long t0 = ns(CLOCK_MONOTONIC);
	struct timespec req = { 0, 20 * 1000 * 1000 };
	int r = nanosleep(&req, NULL);
	long long t1 = ns(CLOCK_MONOTONIC);
	printf("nanosleep returned %d, slept >= 20ms: %s\n", r, t1 - t0 >= 20000000 ? "yes" : "no");
	usleep(5000);
	long long t2 = ns(CLOCK_MONOTONIC);
	printf("usleep slept >= 5ms: %s\n", t2 - t1 >= 5000000 ? "yes" : "no");
	struct timespec abs;
	clock_gettime(CLOCK_MONOTONIC, &abs);
	abs.tv_nsec += 3000000;
	if (abs.tv_nsec >= 1000000000) {
		abs.tv_sec++;
		abs.tv_nsec -= 1000000000;
	}
	r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &abs, NULL);
	long long t3 = ns(CLOCK_MONOTONIC);
	printf("clock_nanosleep(ABSTIME) returned %d, reached target: %s\n", r,
	       t3 >= abs.tv_sec * 1000000000LL + abs.tv_nsec ? "yes" : "no");
	printf("realtime after 2020: %s\n", ns(CLOCK_REALTIME) > 1577836800LL * 1000000000LL ? "yes" : "no");
	printf("cpu clock advances: %s\n", ns(CLOCK_PROCESS_CPUTIME_ID) > 0 ? "yes" : "no");
	sleep(1);
	printf("monotonic never goes back: %s\n", ns(CLOCK_MONOTONIC) >= t3 ? "yes" : "no");
	return 0;
}
