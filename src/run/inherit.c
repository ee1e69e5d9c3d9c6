/* SPDX-License-Identifier: MIT */
#include "inherit.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "exitcodes.h"
#include "log.h"
#include "parse.h"
#include "store.h"

/* inherit.h */
size_t inherit_word(const char **p, const char **start)
{
	const char *s = *p + strspn(*p, " ");
	size_t n = strcspn(s, " ");

	*start = s;
	*p = s + n;
	return n;
}

static void add(struct inherited_holds *r, const char *key, size_t kn, const char *tok, size_t tn,
                const char *fence, size_t fn)
{
	struct inherited *h = &r->in[r->n];

	/* What does not fit is no token of ours: nothing to inherit. */
	if (kn == 0 || kn >= sizeof h->key || tn == 0 || tn >= sizeof h->token ||
	    fn >= sizeof h->fence)
		return;
	memset(h, 0, sizeof *h);
	memcpy(h->key, key, kn);
	memcpy(h->token, tok, tn);
	memcpy(h->fence, fence, fn);
	long long v;
	if (fn > 0 && parse_int(h->fence, LLONG_MIN, LLONG_MAX, &v, NULL, 0) < 0)
		h->fence[0] = '\0'; /* garbled: no fence known (the server's, if it says) */
	for (int i = 0; i < r->n; i++)
		if (!strcmp(r->in[i].key, h->key) && !strcmp(r->in[i].token, h->token))
			return; /* RLOCK_KEY is RLOCK_KEYS' first too */
	r->n++;
}

static int count(const char *s)
{
	const char *w;
	int n = 0;

	while (s && inherit_word(&s, &w) > 0)
		n++;
	return n;
}

/* RLOCK_KEY + RLOCK_TOKEN, then every pair of RLOCK_KEYS + RLOCK_TOKENS (when they have
 * as many words; RLOCK_FENCES too, or no fences are known). */
void inherited_read(struct inherited_holds *r)
{
	const char *k = getenv("RLOCK_KEY"), *t = getenv("RLOCK_TOKEN"), *f = getenv("RLOCK_FENCE");
	const char *ks = getenv("RLOCK_KEYS"), *ts = getenv("RLOCK_TOKENS"),
	           *fs = getenv("RLOCK_FENCES");
	int n = count(ks), first = k && t;

	free(r->in);
	r->in = NULL;
	r->n = 0;
	if (n == 0 || count(ts) != n)
		n = 0;
	if (n + first == 0)
		return; /* the common case: no allocation */
	r->in = malloc((size_t)(n + first) * sizeof *r->in);
	if (!r->in) {
		log_error("out of memory for the %d locks RLOCK_KEYS names", n + first);
		exit(RL_EX_OSERR);
	}
	if (first)
		add(r, k, strlen(k), t, strlen(t), f ? f : "", f ? strlen(f) : 0);
	if (count(fs) != n)
		fs = NULL;
	for (int i = 0; i < n; i++) {
		const char *kw, *tw, *fw = "";
		size_t kn = inherit_word(&ks, &kw), tn = inherit_word(&ts, &tw),
		       fn = fs ? inherit_word(&fs, &fw) : 0;
		add(r, kw, kn, tw, tn, fw, fn);
	}
}

/* One request's deadline: io_ms from now, not past deadline_ms. */
static int64_t cap(int64_t io_ms, int64_t deadline_ms)
{
	int64_t c = clock_ms() + io_ms;

	return c < deadline_ms ? c : deadline_ms;
}

/* PREFIX{NAME} of h's key into prefix and name (LOCK_KEY_MAX each): 0, or -1 when the
 * key has not that shape. */
static int split_key(const struct inherited *h, char *prefix, char *name)
{
	const char *open = strrchr(h->key, '{');
	size_t kn = strlen(h->key);

	if (!open || kn < 3 || h->key[kn - 1] != '}')
		return -1;
	snprintf(prefix, LOCK_KEY_MAX, "%.*s", (int)(open - h->key), h->key);
	snprintf(name, LOCK_KEY_MAX, "%.*s", (int)(kn - (size_t)(open - h->key) - 2), open + 1);
	return 0;
}

/* inherit.h */
int inherited_ours(const struct inherited *h)
{
	size_t tn = strspn(h->token, "0123456789abcdef");
	char prefix[LOCK_KEY_MAX], name[LOCK_KEY_MAX], err[200];

	return tn == LOCK_TOKEN_LEN && !h->token[tn] && split_key(h, prefix, name) == 0 &&
	       parse_prefix(prefix, err, sizeof err) == 0 &&
	       parse_lock_name(name, err, sizeof err) == 0;
}

/* inherit.h */
int inherited_lock(const struct inherited *h, struct lock *l)
{
	char prefix[LOCK_KEY_MAX], name[LOCK_KEY_MAX];

	if (split_key(h, prefix, name) < 0)
		return -1; /* no key of ours */
	return lock_init(l, prefix, name, 0) < 0 ? -1 : 0;
}

/* inherit.h */
int inherited_gone(struct store *s, struct inherited *h, int64_t io_ms, int64_t deadline_ms)
{
	static struct lock probe; /* large */
	char err[300];
	struct holding hd;

	if (!inherited_ours(h))
		return 1; /* no pair rlock wrote: nothing to pass on */
	if (!s || inherited_lock(h, &probe) < 0)
		return 0;
	int rc =
	    store_is_holder(s, &probe, h->token, cap(io_ms, deadline_ms), &hd, err, sizeof err);
	h->live = rc == 1;
	/* The fence passed on is the server's for that token, not what the variable says
	 * (a stale or forged RLOCK_FENCES would fence the command's writes wrong), as a
	 * granted name's (reenter_plan). */
	if (rc == 1 && hd.has_fence)
		snprintf(h->fence, sizeof h->fence, "%lld", hd.fence);
	return rc == 0 && store_knew_token(s, &probe, h->token, cap(io_ms, deadline_ms));
}
