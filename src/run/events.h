/* SPDX-License-Identifier: MIT */
/* What a run did, for the operator: --events FILE (one JSON object per line, each
 * appended with one write(2): waiting, acquired, busy, unavailable, renew-failed,
 * warned, lost, preempted, released, superseded, failed, keeper-*) and --metrics-file
 * (metrics.h, fed from here). The rooms where these things happen call events_emit()
 * with what they know; the rest (the time, the host, the pid, the token's prefix, the
 * label, the hold time) is added here. A file that cannot be written never stops the
 * job: one warning on stderr, once. The line format is a stable interface
 * (docs/operations.md, "Events and metrics").
 */
#ifndef RLOCK_EVENTS_H
#define RLOCK_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "evfacts.h"

/* Set up (relative paths are made absolute here: a keeper changes to "/"); opens
 * nothing until the first event. Not thread-safe: call before any thread starts.
 * Returns 0, or -1 with the reason in err (a usage error). */
int events_setup(const struct events_config *c, char *err, size_t errlen);

/* Record one event: a line in the events file, and what the metrics file keeps.
 * Thread-safe (the renewal threads emit EV_RENEWED and EV_RENEW_FAILED; every other
 * kind comes from the main thread). Never fails, never blocks on a lock of its own. */
void events_emit(enum ev_kind kind, const struct ev_facts *f);

#endif
