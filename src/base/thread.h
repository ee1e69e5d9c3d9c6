/* SPDX-License-Identifier: MIT */
/* rlock's own threads (the renewal, the name lookup, the inherited lease's watch): an
 * explicit, modest stack, not the default one (RLIMIT_STACK, 8 MiB): under a memory
 * limit (RLIMIT_AS of 12 MiB, a small container) the default stack could not be mapped
 * and the renewal thread never started (the lease lost, 79). */
#ifndef RLOCK_THREAD_H
#define RLOCK_THREAD_H

#include <pthread.h>

/* Measured: a renewal over TLS (a reconnect with its handshake) and a name lookup
 * (glibc's NSS modules) use well under 64 KiB; 512 KiB leaves room for OpenSSL's and a
 * libc's deeper paths. The sanitizers need more (ASan's redzones, TSan's shadow
 * frames). A build may set its own: -DRLOCK_THREAD_STACK=BYTES. */
#ifndef RLOCK_THREAD_STACK
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RLOCK_THREAD_STACK (4u << 20)
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define RLOCK_THREAD_STACK (4u << 20)
#endif
#endif
#endif
#ifndef RLOCK_THREAD_STACK
#define RLOCK_THREAD_STACK (512u << 10)
#endif

/* pthread_create() with that stack, detached or not; its error number as ever. */
static inline int rl_thread_create(pthread_t *t, int detached, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	int rc = pthread_attr_init(&attr);

	if (rc != 0)
		return rc;
	rc = pthread_attr_setstacksize(&attr, RLOCK_THREAD_STACK);
	if (rc == 0 && detached)
		rc = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (rc == 0)
		rc = pthread_create(t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return rc;
}

#endif
