/* The only thread: keeps the lease alive with its own connection and decides, on the
 * monotonic clock, when the lease can no longer be guaranteed.
 *
 * The lease granted by a request sent at time s cannot end on the server before
 * s + ttl. The thread renews every ttl/3; when no renewal sent after s has been
 * confirmed by s + ttl * LOSS_FRACTION, or the server says the token is no longer the
 * holder, it reports the loss — early enough that the command is signalled before the
 * server-side lease can expire. */
#ifndef RLOCK_RENEW_H
#define RLOCK_RENEW_H

#include <stdint.h>

#include "client.h"
#include "lock.h"

#define RENEW_LOSS_NUM 4 /* act at 4/5 of the ttl since the last confirmed send */
#define RENEW_LOSS_DEN 5

struct renew;

/* Start the thread. confirmed_sent_ms: when the acquire that succeeded was sent.
 * srv and l must outlive renew_stop(). Returns 0, or -1 with the reason. */
int renew_start(struct renew **out, const struct server *srv, const struct lock *l,
                int64_t confirmed_sent_ms, char *err, size_t errlen);

/* Readable (poll POLLIN) once the lease is lost. */
int renew_fd(const struct renew *r);

/* After renew_fd became readable: why (a static-lifetime string inside r). */
const char *renew_reason(const struct renew *r);

/* Stop renewing, join the thread, free. NULL is fine. */
void renew_stop(struct renew *r);

#endif
