/*
 * A machine whose clock is off: preloaded into a chapter 12 relay, it adds
 * NOTIFY_CLOCK_SKEW_MS milliseconds to every reading of the wall clock
 * (CLOCK_REALTIME, gettimeofday, time), as a relay on another host whose
 * clock drifted would read. Clocks that only count elapsed time
 * (CLOCK_MONOTONIC, behind Rust's Instant) are left as they are: they are
 * never compared across machines. The lab's own moments are read from the
 * kernel by a system call, which this does not reach.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

typedef int (*clock_fn)(clockid_t, struct timespec *);

static long long skew_ns(void)
{
    const char *ms = getenv("NOTIFY_CLOCK_SKEW_MS");
    return ms ? atoll(ms) * 1000000LL : 0;
}

static void shift(struct timespec *ts)
{
    long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + skew_ns();
    ts->tv_sec = ns / 1000000000LL;
    ts->tv_nsec = ns % 1000000000LL;
}

int clock_gettime(clockid_t clock, struct timespec *ts)
{
    static clock_fn real;
    if (!real)
        real = (clock_fn)dlsym(RTLD_NEXT, "clock_gettime");
    int read = real(clock, ts);
    if (read == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE))
        shift(ts);
    return read;
}

int gettimeofday(struct timeval *tv, void *tz)
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

time_t time(time_t *out)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return (time_t)-1;
    if (out)
        *out = ts.tv_sec;
    return ts.tv_sec;
}
