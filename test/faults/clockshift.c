/* clockshift: an LD_PRELOAD shim that makes the wall clock jump, for the fault suite.
 *
 * CLOCK_REALTIME (and _COARSE), gettimeofday() and time() are shifted by the number of
 * seconds (may be negative) in the file named by $CLOCKSHIFT_FILE, re-read at most every
 * 20 ms, so the suite makes the client's wall clock jump while rlock runs. The monotonic
 * clocks are left alone: rlock's deadlines use them, so a jump must change nothing.
 * Built by test/faults/run with: cc -shared -fPIC -o clockshift.so clockshift.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

typedef int (*gettime_fn)(clockid_t, struct timespec *);

static long long shift_s(gettime_fn real)
{
	static long long cached;
	static long long next_read_ns;
	struct timespec m;
	long long now;
	const char *path = getenv("CLOCKSHIFT_FILE");

	if (!path || real(CLOCK_MONOTONIC, &m) != 0)
		return cached;
	now = (long long)m.tv_sec * 1000000000LL + m.tv_nsec;
	if (now >= next_read_ns) {
		FILE *f = fopen(path, "re");
		long long v;

		if (f) {
			if (fscanf(f, "%lld", &v) == 1)
				cached = v;
			fclose(f);
		}
		next_read_ns = now + 20000000LL;
	}
	return cached;
}

static gettime_fn real_gettime(void)
{
	static gettime_fn fn;

	if (!fn)
		fn = (gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
	return fn;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
	gettime_fn real = real_gettime();
	int rc = real(id, ts);

	if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
		ts->tv_sec += shift_s(real);
	return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
	struct timespec ts;

	(void)tz;
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
		return -1;
	if (tv) {
		tv->tv_sec = ts.tv_sec;
		tv->tv_usec = ts.tv_nsec / 1000;
	}
	return 0;
}

time_t time(time_t *t)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
		return (time_t)-1;
	if (t)
		*t = ts.tv_sec;
	return ts.tv_sec;
}
