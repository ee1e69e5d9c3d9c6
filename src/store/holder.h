/* SPDX-License-Identifier: MIT */
/* A holder as text, in one place: every field a holder wrote (host, user, command,
 * label) is untrusted and may hold terminal escapes, so each is escaped (log_escape)
 * whole, never cut short, and an unknown one reads "?". --status, --list, --break, the
 * busy message and the waiting line all print from here. */
#ifndef RLOCK_HOLDER_H
#define RLOCK_HOLDER_H

#include <stddef.h>

#include "lock.h"

/* The fields, ready to print. held and left: "1.5s", "2m05s", "1h02m", or "-". */
struct holder_text {
	char host[4 * sizeof(((struct holder *)0)->host)];
	char user[4 * sizeof(((struct holder *)0)->user)];
	char cmd[4 * sizeof(((struct holder *)0)->cmd)];
	char label[4 * (LOCK_LABEL_MAX + 1)]; /* "" when none */
	char pid[32], fence[32], held[32], left[32];
};

/* Fill *t from h; now_unix_ms: the wall clock, for how long h has held. */
void holder_text(const struct holder *h, long long now_unix_ms, struct holder_text *t);

#define HOLDER_CMD   1 /* " (CMD)" */
#define HOLDER_LABEL 2 /* " [LABEL]" when there is one */
#define HOLDER_RAW   4 /* not escaped (for log_msg(), which escapes the whole line) */

/* "HOST pid PID", with the parts `what` asks for, into buf (truncated to n, always
 * terminated): buf. A name closed by a lock-delay (h->delayed, no holder): "closed by
 * lock-delay for 2.5s more". */
const char *holder_format(const struct holder *h, unsigned what, char *buf, size_t n);

/* When the last --break's record b names token among the holders it broke: "broken 3.2s
 * ago by --break from HOST pid PID (user USER)[ [LABEL]]" into buf (not escaped: for
 * log_msg(), which escapes the whole line), and buf; else NULL. */
const char *holder_broken(const struct broken *b, const char *token, char *buf, size_t n);

/* A duration as "1.5s", "2m05s", "1h02m"; "-" when ms < 0. */
void holder_human_ms(char *buf, size_t n, long long ms);

/* Whether the holder's process still runs, judged only when its host is this host
 * (gethostname) and its record names its process beyond the pid (struct holder's proc):
 * HOLDER_ALIVE when boot, pid namespace and start time match (it started no later than
 * it took the lock); HOLDER_GONE when it can be proven: same boot and namespace and no
 * such process, a zombie, or one that started after the holder took the lock (the pid
 * was reused), or another boot when the lock was taken before this boot began;
 * HOLDER_ELSEWHERE (cannot tell) otherwise: another host, another pid namespace, another
 * machine of the same name, an older record without proc, or the pid unknown. */
enum holder_proc { HOLDER_ELSEWHERE = -1, HOLDER_GONE = 0, HOLDER_ALIVE = 1 };

enum holder_proc holder_process(const struct holder *h);

/* This process's "BOOT_ID PIDNS_INODE" (/proc/sys/kernel/random/boot_id, the inode of
 * /proc/self/ns/pid), read once; "" when either cannot be read. */
const char *holder_proc_self(void);

#endif
