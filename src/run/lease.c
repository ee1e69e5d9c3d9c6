/* SPDX-License-Identifier: MIT */
#include "lease.h"
#include "clock.h"

#include <stdio.h>

#define LOSS_NUM 4 /* lost at 4/5 of the ttl since the last confirmed send */
#define LOSS_DEN 5
#define KILL_NUM 9 /* the group's SIGKILL lands by 9/10 of it */
#define KILL_DEN 10

int64_t lease_loss_after(int64_t ttl_ms)
{
	return ttl_ms * LOSS_NUM / LOSS_DEN;
}

int64_t lease_renew_window(int64_t ttl_ms)
{
	return lease_loss_after(ttl_ms) - ttl_ms / 3;
}

int64_t lease_kill_by(int64_t ttl_ms)
{
	return ttl_ms * KILL_NUM / KILL_DEN;
}

int64_t lease_warn_after(int64_t ttl_ms)
{
	return ttl_ms * 2 / 3;
}

int lease_release(struct store *s, const struct store_config *cfg, const struct lock *l,
                  int64_t keep_ms, int64_t lease_end, int64_t cap_ms, struct store **opened,
                  char *err, size_t errlen)
{
	struct store *fresh = NULL;
	int64_t cap = cap_ms < lease_end ? cap_ms : lease_end;
	int rc = LOCK_ERR;

	if (opened)
		*opened = NULL;
	if (clock_ms() >= lease_end) {
		snprintf(err, errlen, "%s", LEASE_OVER);
		return LOCK_ERR;
	}
	snprintf(err, errlen, "no connection to release on");
	/* A fresh handle may be the very thing that is lacking (a descriptor). */
	if (!s && cfg && store_open(&fresh, cfg, 0, cap, err, errlen) == STORE_OK)
		s = fresh;
	if (s)
		rc = store_release(s, l, keep_ms, cap, err, errlen);
	if (opened)
		*opened = fresh; /* the caller's: its WAIT goes where the release was written */
	else
		store_close(fresh);
	if (rc != LOCK_OK && rc != LOCK_NOTOURS && rc != LOCK_HANDED_OVER && rc != LOCK_HANDED_ON &&
	    rc != LOCK_KEEP_OVER) {
		if (clock_ms() >= lease_end)
			snprintf(err, errlen, "the lease ended meanwhile");
		rc = LOCK_ERR;
	}
	return rc;
}
