/* SPDX-License-Identifier: MIT */
/* The lock protocol: every state change is one Lua script, sent with EVALSHA and
 * retried with EVAL on NOSCRIPT. Keys of one lock share the {NAME} hash tag, so every
 * script runs on one node of a cluster. Each mode has its script set (lock.c).
 *
 *   PREFIX{NAME}           exclusive holder: token, PX ttl (plain SET NX PX compatible)
 *   PREFIX{NAME}:fence     INCR per acquisition (every mode, every permit), never
 *                          expires -> RLOCK_FENCE; a signed 64-bit integer, kept a
 *                          string in the scripts, never a Lua number (src/store/lua/counter.lua)
 *   PREFIX{NAME}:owner     hash host pid user cmd start ttl fence label renewed [kept], same
 *                          expiry as the lock (kept: the command exited, --min-hold keeps
 *                          it; renewed: the last confirmed renewal, server ms)
 *   PREFIX{NAME}:holders   zset token -> lease end (server ms): shared holders / permits
 *   PREFIX{NAME}:meta      hash token -> JSON {host pid user cmd start ttl fence renewed
 *                          [kept]}
 *   PREFIX{NAME}:limit     "shared" or N: what the holders agreed on
 *   PREFIX{NAME}:queue     zset token -> arrival (server us): the fair queue
 *   PREFIX{NAME}:qlease    zset token -> queue lease end (server ms): LOCK_QUEUE_LEASE_MS
 *                          (the ttl if shorter), refreshed by every attempt of the waiter
 *   PREFIX{NAME}:qmeta     hash token -> JSON {host pid}: who waits in the queue
 *   PREFIX{NAME}:writer    token of a waiting exclusive request, PX LOCK_QUEUE_LEASE_MS (the
 *                          ttl if shorter), refreshed by every attempt of the waiter
 *   PREFIX{NAME}:waiters   zset token -> place lease end (server ms): plain waiters
 *                          and waiting --limit requests (no queue)
 *   PREFIX{NAME}:wake:TOK  list: a plain waiter's wake-up (it BLPOPs); also the pub/sub
 *                          channel of one queued waiter (wakes the head only)
 *   PREFIX{NAME}:released  pub/sub channel: everyone else who waits (no queue)
 *   PREFIX{NAME}:done      --once-per: the fence of the run that succeeded, PX the window;
 *                          while it lives, an acquire with --once-per is done (LOCK_DONE)
 *   PREFIX{NAME}:supersede hash token host pid label: the one waiting --supersede request,
 *                          PX its ttl (a newer one replaces it: LOCK_SUPERSEDED)
 *   PREFIX{NAME}:superseded:TOKEN  hash host pid label: who replaced TOKEN's --supersede
 *                          request, PX 3 x the newer ttl (60 s at least): LOCK_SUPERSEDED
 *                          on every later attempt, the lock held or free
 *   PREFIX{NAME}:supersede:last  hash token host pid label: the newest --supersede request
 *                          (written as it takes the place or the lock), PX the history's
 *                          retention, at (server ms): an attempt that had the place,
 *                          or whose first attempt went unanswered and finds it written
 *                          since then, and finds another token is LOCK_SUPERSEDED
 *   PREFIX{NAME}:preempt   hash token host pid label [handover]: a --preempt request for a
 *                          --preemptible holder, PX min(ttl, 5 s), renewed by its attempts
 *                          (its renewal: LOCK_PREEMPTED); handover 1: the holder released
 *                          for it, the free lock is that request's only
 *   PREFIX{NAME}:rel:TOKEN no history record written: "1", TOKEN released, PX the lease left
 *                          (a release sent again after a lost reply answers the same; with
 *                          the history on, its released record says it: history.lua)
 *   PREFIX{NAME}:history   stream of the runs and supersessions (src/store/lua/history.lua),
 *                          capped, PEXPIRE the retention on every write
 *   PREFIX{NAME}:broken    hash host pid user at tokens fence label: the last --break (who
 *                          broke which holders, at server ms), PX LOCK_BROKEN_KEEP_MS
 *   PREFIX{NAME}:delay     --lock-delay: zset token -> lease end + the holder's delay
 *                          (server ms), moved on by renewals, removed by a release; an
 *                          entry whose lease ended unreleased closes the name to every
 *                          acquire until its score (src/store/lua/delay.lua)
 * All but the fence expire with the leases in them (refreshed to the longest one).
 */
#ifndef RLOCK_LOCK_H
#define RLOCK_LOCK_H

#include <stdint.h>

#include <stddef.h>

#include "parse.h" /* LOCK_NAME_MAX */

/* Handed through, never opened here: a connection (client.h) and a reply (resp.h), so a
 * file that reads a lock sees neither the socket nor the RESP layer. */
struct client;
struct resp_reply;

#define LOCK_KEY_MAX   1100
#define LOCK_TOKEN_LEN 32  /* 128 bits, hex */
#define LOCK_LABEL_MAX 256 /* --label TEXT: bytes */
#define LOCK_LIMIT_MAX 100000
/* A waiter's place in the fair queue is a lease of its own, this long (or its ttl when
 * shorter; src/store/lua/acquire_sem.lua's QLEASE_MS): a waiter refreshes it at least every
 * third of it (wait.c), and one that died costs the next at most this long. */
#define LOCK_QUEUE_LEASE_MS 5000
/* How long the record of a --break is kept (src/store/lua/break.lua's BROKEN_MS). */
#define LOCK_BROKEN_KEEP_MS 3600000

enum lock_mode {
	LOCK_EXCLUSIVE = 0, /* the default */
	LOCK_SHARED,        /* -s: many shared holders, no exclusive one */
	LOCK_LIMIT,         /* -l N: at most N holders, each its own permit */
};

/* A lock request: what the run asks of each of its locks, written by the front end's
 * option table (struct opts' lock; frontend.c adds prefix, mode and nowait) and carried
 * by value in every struct lock (l->ask) down to the store, the backends and the
 * scripts' arguments (lock.c). A new lock-request option is its row in the option
 * table, a field here, its argument in lock.c and the script that obeys it. */
struct lock_ask {
	const char *prefix; /* key prefix */
	int64_t ttl_ms;
	enum lock_mode mode;
	int limit;  /* LOCK_LIMIT: N */
	int fair;   /* --fair: join the FIFO queue when busy */
	int nowait; /* -n: never join the queue */
	/* --once-per: 0 none; else the acquire is refused while PREFIX{NAME}:done lives
	 * (LOCK_DONE), and a release with mark_done set writes it for this many ms. */
	int64_t once_per_ms;
	/* Deploy queues (plain exclusive lock): --supersede, --preempt, --preemptible;
	 * the history's length (0: off) and retention, written by the scripts. */
	int supersede, preempt, preemptible;
	int history_len;
	int64_t history_ms;
	/* --lock-delay: 0 none; else a lease of this lock that ends without a release keeps
	 * the name closed this many ms more (PREFIX{NAME}:delay). */
	int64_t delay_ms;
};

/* One lock request. Its identity (lock_init, lock_set_mode) is fixed for the run and
 * read by every layer; the last attempt's outcome and the store's choices for the next
 * request are written by the store and lock.c. The lock's other keys (PREFIX{NAME}:fence,
 * :owner, :holders, ...) are made by lock.c when it builds a request. */
struct lock {
	/* identity */
	char key[LOCK_KEY_MAX];         /* PREFIX{NAME} */
	char channel[LOCK_KEY_MAX];     /* PREFIX{NAME}:released, the release channel */
	char wake_prefix[LOCK_KEY_MAX]; /* PREFIX{NAME}:wake: */
	/* wake_prefix + token: this waiter's own channel (a queue's head), and for a plain
	 * waiter with a place the list a release pushes to (it waits with BLPOP). */
	char wake_channel[LOCK_KEY_MAX];
	char token[LOCK_TOKEN_LEN + 1];
	struct lock_ask ask; /* the request (its prefix: the run's; key holds it) */
	int mark_done;       /* set before the release: the command succeeded */
	/* --supersede: an attempt took the waiting place, the next ones check they still
	 * have it; run_status: the command's exit status for the release's record (-1:
	 * none). */
	int supersede_placed;
	/* --supersede: when its first attempt was sent (clock_ms; 0: not yet), and how long
	 * before this attempt: the script takes the name's newest request written since then
	 * for a newer one (an attempt whose first reply never came cannot tell otherwise) */
	int64_t supersede_first_ms, supersede_age_ms;
	int run_status;
	/* set before the release: rlock declared the lease lost by its own clock (its
	 * renewal gave up, the command was stopped, exit 79): the release, when it still
	 * finds the lock its own, frees it and records the run lost, not released */
	int lost_declared;
	/* set before the release: the lease was found lost while the command ran (also
	 * with --on-lost ignore); unset, a lease over by rlock's clock at the release
	 * ended after the command did: the run held the lock to its end, "expired" */
	int lost_seen;
	/* set before the release: a renewal found the token no longer holding, before the
	 * lease's end by rlock's clock: the lock was taken away (deleted, evicted, broken),
	 * the run ends lost, never expired; lease_ms: the lease's end by rlock's clock, in ms
	 * after the acquire was sent (0: unknown), for the script to tell a lock found gone
	 * sooner than that by the server's clock (taken away) from one that expired */
	int taken_seen;
	int64_t lease_ms;
	/* set before the release: rlock stopped the command for a --preempt request (exit
	 * 81): the release records the run preempted; unset, it records released even when
	 * a request waits (the command ended on its own; the request gets the lock) */
	int preempted_declared;
	/* set after such a release: the request never took the lock (it gave up or died);
	 * the release sent again records the run released, not preempted (release.lua) */
	int handover_untaken;
	/* set before the release: the give-back of a Redlock attempt that got no quorum
	 * (quorum.c): the node's grant was no run, its acquired record is taken back */
	int attempt_declared;

	/* per attempt */
	/* How scripts announce a release on channel: "PUBLISH" (lock_init's default), or
	 * "SPUBLISH" (sharded, Redis >= 7 cluster: the owning shard only). Every script that
	 * publishes takes it as an argument; waiters subscribe to match. */
	const char *publish_cmd;
	long long fence; /* set by a successful acquire */
	/* A plain waiting request takes a place among the waiters, so that a release wakes
	 * one waiter (its list) instead of everyone (the channel). may_place: the store
	 * allows it (not Redlock: a release on each node would wake a different waiter);
	 * placed: the last busy reply gave this request a place; asked: an acquire of this
	 * token was sent before (only then can a place or a wake-up of it exist: its first
	 * grant has none to clear, acquire.lua). */
	int may_place;
	int placed;
	int asked;
	/* The last acquire was answered with an error raised while its script ran: Redis
	 * keeps what the script wrote before it (a grant, perhaps), so a run that gives up
	 * then gives the token's lock back (wait.c), as after a reply that never came. */
	int script_failed;

	/* --break: who breaks (recorded in PREFIX{NAME}:broken; NULL: none recorded), and
	 * the one holder to break: its token and/or fence (a 64-bit integer as text);
	 * NULL: any (every holder is broken). */
	const struct lock_meta *breaker;
	const char *break_token, *break_fence;
	/* --reset (with breaker): clear the name's marks (lock-delay, --once-per), remove
	 * no holder */
	int reset;
};

/* One holder, parsed once from a script's reply. Text fields are "" when unknown and
 * untrusted (escape before printing); pid, start_ms and ttl_ms are -1 when unknown
 * (or not a plain number); fence is 0 and has_fence 0 when unknown (any 64-bit value,
 * negative too, is a fence). */
struct holder {
	int held;
	char mode;         /* 'x' exclusive, 's' shared, 'l' a permit of --limit */
	int kept;          /* released by its command, kept by --min-hold until the lease ends */
	long long pttl_ms; /* -1: no expiry (set by hand) or unknown, -2: gone */
	int split_vote;    /* Redlock busy: some nodes granted, given back (no quorum) */
	long long fence;
	int has_fence;
	long long pid, start_ms, ttl_ms;
	char token[80];
	char host[256], user[64], cmd[512];
	char label[LOCK_LABEL_MAX + 1]; /* --label, "" if none */
	/* no holder: the name is closed by a lock-delay (a lease that ended unreleased);
	 * pttl_ms is the time it stays closed */
	int delayed;
	/* since the last confirmed renewal (server's clock); -1 unknown */
	long long renewed_ago_ms;
	/* "BOOT_ID PIDNS_INODE" of the holder's process (holder_proc_self), "" unknown */
	char proc[80];
	int preemptible; /* busy reply: the holder let --preempt stop it */
	/* no holder: the name is kept for the --preempt request of host/pid/label (its
	 * holder was preempted); pttl_ms is how long the reservation lasts */
	int reserved;
	/* no holder: the fair queue keeps the request out, this many --fair waiters first */
	int queued;
	/* no holder: a waiting exclusive request's mark keeps a shared or permit request out */
	int writer;
	/* Redlock busy, no holder on a majority of the nodes, several on some: "held on K of
	 * N Redlock nodes by M holders, none on a majority: HOST pid PID [LABEL] on K, ..."
	 * (not escaped, as HOLDER_RAW), else "" */
	char split[640];
};

/* Nobody holds the name, and holder_format says why (lock-delay, a --preempt
 * reservation, Redlock nodes split between holders): a message says its text, never
 * "held by". */
static inline int holder_nobody(const struct holder *h)
{
	return h->delayed || h->reserved || h->queued || h->writer || h->split[0];
}

struct waiter {
	char token[80];
	long long lease_left_ms;
	char host[256];      /* "" unknown */
	long long pid;       /* -1 unknown */
	long long waited_ms; /* since it joined the queue (server's clock); -1 unknown */
};

/* The last --break's record (PREFIX{NAME}:broken). */
struct broken {
	int known;
	char host[256], user[64];
	long long pid;     /* -1 unknown */
	long long ago_ms;  /* since the break, by the server's clock */
	char tokens[1200]; /* the broken holders' tokens, space-separated */
	char fence[32];    /* the (first) broken holder's fence, "" unknown */
	/* the breaker's --label, "" none */
	char label[LOCK_LABEL_MAX + 1];
};

/* --preempt's hand-over (PREFIX{NAME}:preempt, handover 1): a preempted holder's release
 * kept the free lock for the request that stopped it; every other acquire waits. */
struct reserved {
	int known;
	char token[80];
	char host[256];
	long long pid; /* -1 unknown */
	char label[LOCK_LABEL_MAX + 1];
	long long left_ms; /* the reservation's time left, by the server's clock (-1 no expiry) */
	/* known 0: the request took the hand-over a moment ago (token: that request) */
	int taken;
};

#define HOLDERS_MAX 32
#define WAITERS_MAX 32

/* Everything --status and --break show: every holder and the queue. */
struct holders {
	int total; /* live holders (h keeps the first HOLDERS_MAX) */
	int n;     /* entries in h */
	struct holder h[HOLDERS_MAX];
	int queued; /* live waiters in the fair queue */
	int nq;     /* entries in q, in queue order */
	struct waiter q[WAITERS_MAX];
	int waiting;               /* live places of plain exclusive waiters */
	long long last_fence;      /* the counter (0 if absent, as INCR counts) */
	int has_last_fence;        /* 0: the counter holds something else (set by hand) */
	char limit[16];            /* "shared", N, or "" */
	char writer[80];           /* token of a waiting exclusive request, or "" */
	int nodes_ok, nodes_total; /* Redlock: nodes that answered, of all (0, 0 otherwise) */
	int done;                  /* the --once-per mark PREFIX{NAME}:done exists */
	long long done_pttl_ms;    /* its time left (-1: no expiry, set by hand) */
	char done_fence[32];       /* its value: the fence of the run that succeeded */
	long long closed_ms;       /* --lock-delay: the name stays closed this long (0: open) */
	struct broken broken;      /* the last --break, if its record still lives */
	struct reserved reserved;  /* --preempt's hand-over, while the lock is kept for it */
	/* Redlock, no token on a majority: nodes that refuse an acquire, so many that no
	 * majority is free (0 when a majority can be free): split_held held by split_tokens
	 * other tokens; with nothing else on a majority, also nodes closed by a lock-delay,
	 * kept for a --preempt request or with live --fair places (a holder on one, a
	 * lock-delay on another) */
	int split_nodes, split_tokens, split_held, split_closed, split_reserved, split_queued;
	long long split_ms; /* until enough of them end for a majority to be free, -1 unknown */
	int refused;        /* --break --token/--if-fence: no such holder, nothing broken */
	int pruned;         /* --break: places of gone waiters dropped from the queue */
	/* --break, --reset: keys of the name's layout that held another type than rlock's
	 * (set by hand: every acquire failed on them), deleted first: the key's suffix
	 * (":delay", "" for the lock itself) and the type it held */
	int nstrays;
	struct {
		char suffix[16], type[16];
	} strays[24];
	int here; /* status read key by key (a migrating slot): the name's keys on the node
	           * that answered; -1 otherwise */
	/* Redlock status that cannot tell (LOCK_ERR): what the silent nodes could make a
	 * majority, "1 of 3 Redlock nodes have it closed by a lock-delay, 1 did not answer
	 * (2 needed)", with nodes_ok/nodes_total; "" otherwise */
	char undecided[200];
};

enum lock_rc {
	LOCK_OK = 0,      /* acquired / renewed / released */
	LOCK_BUSY = 1,    /* acquire: someone else holds it (holder filled) */
	LOCK_NOTOURS = 2, /* renew/release: the token is no longer the holder */
	/* acquire with --once-per: a run succeeded inside the window (the holder's pttl_ms:
	 * the window's time left, -1 no expiry) */
	LOCK_DONE = 3,
	/* acquire with --supersede: a newer --supersede request took this one's place (the
	 * holder's host, pid and label: the newer request's) */
	LOCK_SUPERSEDED = 4,
	/* renew of a --preemptible holder: renewed, and a --preempt request asks for the
	 * lock (err: who asked) */
	LOCK_PREEMPTED = 5,
	/* release told preempted (preempted_declared): released, and handed to the --preempt
	 * request that stopped the command, whose mark still lived (release.lua); a release
	 * that found the mark gone (the request gave up or died) says LOCK_OK */
	LOCK_HANDED_OVER = 6,
	/* release with keep_ms > 0 (--min-hold) not told preempted: released at once, not
	 * kept, as a --preempt request's mark lived (the command ended before it was
	 * stopped): the lock went to that request (release.lua's reply 1 to a keep) */
	LOCK_HANDED_ON = 7,
	/* release with keep_ms > 0 sent again (its first reply lost): the first call kept
	 * the lock for --min-hold, and that keep is over now (release.lua's reply 4) */
	LOCK_KEEP_OVER = 8,
	LOCK_ERR = -1, /* connection or server error; reason in err */
	/* NOAUTH / NOPERM / WRONGPASS, or a fence counter that cannot count (RLOCKFENCE:
	 * not an integer, at the maximum): refusals that waiting cannot fix. */
	LOCK_DENIED = -3,
	/* A routing error (MOVED, ASK, READONLY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN,
	 * LOADING): another node, or later, may take it; err holds the reply verbatim
	 * for the store's route (store.h). */
	LOCK_REDIRECT = -4,
	LOCK_MISMATCH = -5, /* holders of another mode or limit (reason in err): exit 64 */
};

/* Build the key names and a fresh random token (getrandom). -1 if no randomness. */
int lock_init(struct lock *l, const char *prefix, const char *name, int64_t ttl_ms);
/* lock_init for the request a (its prefix and ttl), which l then carries (l->ask). */
int lock_init_ask(struct lock *l, const struct lock_ask *a, const char *name);

/* The lock NAME of a key of lock_init's: PREFIX{NAME} (exclusive),
 * PREFIX{NAME}:holders (shared, permits), PREFIX{NAME}:delay (--lock-delay) or
 * PREFIX{NAME}:preempt (--preempt) or PREFIX{NAME}:queue (--fair) into name
 * (LOCK_NAME_MAX + 1 bytes): 0, or -1 when key is neither (another key of the lock, not
 * under prefix, or a NAME that -k refuses: parse_lock_name's rule, so not rlock's). */
int lock_name_of_key(const char *prefix, const char *key, size_t len, char *name);

/* 1 when err is the refusal of a script's foreign step (RLOCKFOREIGN, foreign.lua: under
 * --prefix '' a key of the name's shape, the name's fence counter never counted an
 * acquisition: the user's, not rlock's; the script returned LOCK_DENIED; Redlock's
 * "no quorum" quotes it), else 0. --list leaves such a name out. */
int lock_err_foreign(const char *err);

/* Choose the mode (and its scripts): limit is N for LOCK_LIMIT; fair joins the queue
 * when busy, nowait never does. Call after lock_init (which sets exclusive, not fair). */
void lock_set_mode(struct lock *l, enum lock_mode mode, int limit, int fair, int nowait);

/* The pub/sub channels a waiter of l subscribes to, into ch[0..1]: the release
 * channel, and its own wake-up channel when it may wait in a queue (any mode but a
 * plain exclusive lock, which never joins one) or be woken alone (--supersede; --preempt:
 * a preempted holder's release publishes there only). Returns how many (1 or 2). */
int lock_channels(const struct lock *l, const char **ch);

/* Owner metadata recorded with the lock. */
struct lock_meta {
	const char *host, *user, *cmd;
	long pid;
	long long start_unix_ms; /* nonzero: recorded as the time each request is formed */
	const char *label;       /* --label, or NULL */
	const char *proc;        /* holder_proc_self(): boot id and pid namespace, or NULL */
};

/* Decoders of the scripts' replies, pure (no I/O; r stays the caller's), so they are
 * fuzzed on their own (fuzz/fuzz_lock_reply.c). Any reply shape is handled: an
 * unexpected one is LOCK_ERR with the reason in err, a server error LOCK_ERR or
 * LOCK_DENIED.
 * acquire: LOCK_OK (l->fence set from {1, fence}, the fence a string or an integer),
 *          LOCK_DENIED (RLOCKFENCE: the counter cannot count), LOCK_BUSY (*h filled from the
 *          holder's 9 fields, or {4, ms}: h->delayed, closed by a lock-delay for
 *          h->pttl_ms), LOCK_DONE ({3, pttl}: h->pttl_ms the window's time left),
 * LOCK_MISMATCH (RLOCKMODE: holders of another mode); int (renew, release): LOCK_OK with *v; fence
 * (Redlock's merge): LOCK_OK with the counter after it in *v; holders (status, break; what names it
 * in err): LOCK_OK with *hs filled. */
int lock_decode_acquire(const struct resp_reply *r, struct lock *l, struct holder *h, char *err,
                        size_t errlen);
int lock_decode_int(const struct resp_reply *r, const char *what, long long *v, char *err,
                    size_t errlen);
/* renew: as int, and {3, host, pid, label} (preempted: *v 3, *by who asked). */
int lock_decode_renew(const struct resp_reply *r, long long *v, struct holder *by, char *err,
                      size_t errlen);
int lock_decode_fence(const struct resp_reply *r, long long *v, char *err, size_t errlen);
/* A fence in a reply, exact over the signed 64-bit range: an integer, or a string of one
 * (how the scripts send it). 0 with *v, or -1 (anything else). */
int lock_fence_value(const struct resp_reply *r, long long *v);
int lock_decode_holders(const struct resp_reply *r, const char *what, struct holders *hs, char *err,
                        size_t errlen);

/* One script call, built but not sent, holding copies of its arguments: for callers
 * that drive several servers at once (quorum.c). lock_request_argv fills argv/lens
 * (room for LOCK_ARGV_MAX) for EVALSHA, or (full) for EVAL after a NOSCRIPT reply,
 * and returns argc. Decode the reply with lock_decode_*: acquire; int (renew,
 * release: 0 is not ours); fence (the counter after the merge); holders (status,
 * break). The builders return 0, or -1 with the reason. */
#define LOCK_ARGV_MAX 48

struct lock_request {
	int script, argc;
	const char *argv[LOCK_ARGV_MAX];
	size_t lens[LOCK_ARGV_MAX];
	char buf[16384];
};
int lock_request_acquire(struct lock_request *q, const struct lock *l, const struct lock_meta *m,
                         char *err, size_t errlen);
int lock_request_renew(struct lock_request *q, const struct lock *l, char *err, size_t errlen);
int lock_request_release(struct lock_request *q, const struct lock *l, int64_t keep_ms, char *err,
                         size_t errlen);
int lock_request_holders(struct lock_request *q, const struct lock *l, int brk, char *err,
                         size_t errlen);
/* A waiter gives up (leave.lua): its place, its marks, its --preempt request. */
int lock_request_leave(struct lock_request *q, const struct lock *l, char *err, size_t errlen);
/* Redlock's fence: raise PREFIX{NAME}:fence to `fence` if it is lower (a max-merge). */
int lock_request_fence(struct lock_request *q, const struct lock *l, long long fence, char *err,
                       size_t errlen);
int lock_request_argv(const struct lock_request *q, int full, const char **argv, size_t *lens);

/* --history: one entry of PREFIX{NAME}:history (src/store/lua/history.lua), as stored
 * (untrusted text, "" when absent): ev is acquired, released, expired, broken, preempted
 * or superseded; by_*: who broke, preempted or superseded it; at_ms: the server's time
 * of the write (the entry's id). */
struct history_entry {
	long long at_ms;
	char id[48];
	char ev[16];
	char fence[24];
	char token[40];
	char host[256], pid[24], user[64], label[LOCK_LABEL_MAX + 1], status[24];
	char by_host[256], by_pid[24], by_user[64], by_label[LOCK_LABEL_MAX + 1];
	char cleared[32]; /* reset: the marks cleared ("lock-delay once-per") */
	/* Redlock's merge (quorum.c): the fence it sorts by, its own, or for an entry
	 * without one (a --reset, a --preempt reservation's break), the one before it */
	char order[24];
	char seen[8]; /* "read": an end not recorded, seen by this read (history_read.lua) */
};
#define HISTORY_MAX 1000 /* entries one read returns at most */
int lock_request_history(struct lock_request *q, const struct lock *l, int count, char *err,
                         size_t errlen);
/* The reply into e (room for max): the number of entries, or LOCK_ERR with err. */
int lock_decode_history(const struct resp_reply *r, struct history_entry *e, int max, char *err,
                        size_t errlen);

/* Read the newest count entries (at most HISTORY_MAX) into e: how many, or LOCK_ERR,
 * LOCK_DENIED, LOCK_REDIRECT. */
int lock_history(struct client *c, const struct lock *l, int count, int64_t deadline_ms,
                 struct history_entry *e, char *err, size_t errlen);
/* --check: the i-th script of the protocol (from 0), its text and SHA-1 as embedded.
 * 0, or -1 past the last. */
int lock_script(int i, const char **text, size_t *len, const char **sha);

/* Try once. LOCK_OK (l->fence set), LOCK_BUSY (*h filled; with --fair, l's place in
 * the queue is taken or refreshed), LOCK_MISMATCH, LOCK_ERR, LOCK_DENIED. */
int lock_acquire(struct client *c, struct lock *l, const struct lock_meta *m, int64_t deadline_ms,
                 struct holder *h, char *err, size_t errlen);

/* Extend the lease to ttl if the token still holds it: LOCK_OK, LOCK_NOTOURS, LOCK_ERR,
 * or LOCK_PREEMPTED (a --preempt request asked this --preemptible holder: who asked in
 * *by; the text of it is the caller's, holder.h). */
int lock_renew(struct client *c, const struct lock *l, int64_t deadline_ms, struct holder *by,
               char *err, size_t errlen);

/* Release if the token still holds it: delete and publish, or, when keep_ms > 0, let
 * the lease run for keep_ms more and then expire (--min-hold). LOCK_OK, LOCK_NOTOURS,
 * LOCK_ERR, or LOCK_HANDED_OVER (l->preempted_declared, and the --preempt request's mark
 * still lived: the lock went to it, --min-hold notwithstanding; a release sent again
 * answers as the first did), or LOCK_HANDED_ON (keep_ms > 0, the command not stopped:
 * not kept, handed to a --preempt request whose mark lived), or LOCK_KEEP_OVER (keep_ms > 0,
 * sent again: kept by the first call, the keep over now). With the history on, a token that no
 * longer holds it records its run lost (once: src/store/lua/history.lua); keep_ms LOCK_KEEP_LOST
 * releases nothing and records the run lost (the lease is over by the holder's clock, lease.h:
 * never a release then). */
#define LOCK_KEEP_LOST INT64_MIN
int lock_release(struct client *c, const struct lock *l, int64_t keep_ms, int64_t deadline_ms,
                 char *err, size_t errlen);

/* A waiter that gives up: leave the queue (waking the next if it was the head) and
 * drop its writer mark. LOCK_OK, LOCK_SUPERSEDED (a newer --supersede request had
 * replaced it before it left: *newer says which) or LOCK_ERR. */
int lock_leave(struct client *c, const struct lock *l, int64_t deadline_ms, struct holder *newer,
               char *err, size_t errlen);

/* Read every holder of the lock and its queue without changing anything. */
int lock_status(struct client *c, const struct lock *l, int64_t deadline_ms, struct holders *hs,
                char *err, size_t errlen);

/* Force release every holder (operator use); *hs says what was removed. */
int lock_break(struct client *c, const struct lock *l, int64_t deadline_ms, struct holders *hs,
               char *err, size_t errlen);

/* How a token holds a lock now (lock_holds, store_is_holder). */
struct holding {
	char mode;             /* 'x', 's', 'l' */
	int limit;             /* the holders' N ('l'; else 0) */
	long long ttl_left_ms; /* the lease left by the server's clock; -1 unknown */
	long long fence;
	int has_fence;
};

/* 1 if token is a live holder of l (exclusive or shared/permit), 0 if not; else the
 * failure, as lock_status says it (LOCK_ERR, LOCK_DENIED, LOCK_REDIRECT).
 * On 1, *hd says how. Reads only (the status script; ZSCORE and TIME past the holders
 * it lists). */
int lock_holds(struct client *c, const struct lock *l, const char *token, int64_t deadline_ms,
               struct holding *hd, char *err, size_t errlen);

/* A Cluster slot left MIGRATING/IMPORTING (a resharding stopped half-way): the status
 * script's declared keys are refused (TRYAGAIN) unless all are on one node. The status
 * read key by key on one node (status.lua): with no key, on the node c goes to (the
 * slot's owner, the one it migrates from); with probe, with one key never created, which
 * that node sends (ASK) to the one the slot migrates to. hs->here: how many of the
 * name's keys that node has. As lock_status otherwise. */
int lock_request_status_here(struct lock_request *q, const struct lock *l, int probe, char *err,
                             size_t errlen);
int lock_status_here(struct client *c, const struct lock *l, int probe, int64_t deadline_ms,
                     struct holders *hs, char *err, size_t errlen);
/* 1 when err (of a LOCK_REDIRECT) is a refusal of a migrating slot: TRYAGAIN, or a
 * script's command on a key the node does not have. */
int lock_is_migrating(const char *err);
/* How token holds the lock, from a status: 1 (*hd says how), 0, or -1 when hs lists
 * fewer shared holders or permits than there are (the token may be among the others). */
int lock_holding(const struct holders *hs, const char *token, struct holding *hd);

#endif
