/* SPDX-License-Identifier: MIT */
/* The store: where locks live. main, wait, renew and report talk only to this layer;
 * it owns the connections, decides where each command goes, and retries once on a
 * fresh connection where that is safe. lock.c is the protocol it speaks.
 *
 * Handles and threads. A struct store is one thread's handle (main has one, the
 * renewal thread opens its own with store_open() on the same config): a handle and
 * everything it owns (connections, the route's state) is used by one thread at a
 * time. The config is shared read-only once store_resolve() has run.
 *
 * Connections. A call that fails marks its connection broken: it is closed and the
 * next call opens a fresh one. One exception keeps a connection's order: after a
 * request that went out in full but whose reply never came (deadline, abort fd), the
 * connection is kept for a store_release() only, which the server then runs after
 * the unanswered request (how a lock an interrupted acquire may have taken is given
 * back); any other call replaces it. Calls that are safe to repeat (renew, release,
 * status, is-holder, --list's SCAN) are retried once on a fresh connection when they
 * failed on one opened earlier (a NAT, a server `timeout`, a restart may have closed
 * it while idle), never after a terminating signal (conn_abort_pending()).
 *
 * Deadlines. Every call takes cap_ms, an absolute monotonic time nothing it does
 * goes past (STORE_NO_CAP: none); each request also has its own io-timeout.
 *
 * How a backend plugs in (Sentinel, Cluster). The single-server backend here is
 * connections + retries around one `struct server`. A backend that must find the
 * server first, or follow redirects, supplies a `struct store_route` (its own file,
 * e.g. sentinel.c, cluster.c) and a case in the front end's store_config_from_opts():
 *   - locate(key): the server that owns key (the Sentinel master; the node of key's
 *     slot) before every request; the store reconnects when the pointer it returns
 *     differs from the connected one, so keep servers at stable addresses;
 *   - redirect(key, srv, errtext): srv answered with a routing error (MOVED, ASK,
 *     READONLY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN, LOADING: lock.c returns
 *     LOCK_REDIRECT with the error text verbatim), or, errtext NULL, the connection
 *     to srv failed. Return STORE_ROUTE_RETRY (forget what you knew: the store calls
 *     locate again and repeats, at most STORE_HOPS_MAX times within cap_ms),
 *     STORE_ROUTE_ASK with *ask set (repeat once on *ask after ASKING),
 *     STORE_ROUTE_LATER (a state that passes, e.g. TRYAGAIN while the slot migrates:
 *     the store pauses, 50 ms doubling, and repeats, at most STORE_PAUSES_MAX times
 *     within cap_ms; then the error stands) or STORE_ROUTE_FAIL (the error stands);
 *   - master(i): the i-th master for --list (NULL after the last);
 *   - subscribe_cmd(key): "SUBSCRIBE" (the default) or "SSUBSCRIBE" (sharded pub/sub:
 *     then releases are announced with SPUBLISH, and waiters listen with both, so a
 *     PUBLISH from a run that did not know wakes them too);
 *   - probe(cap_ms): learn what only asking tells (Cluster: is it one, which version),
 *     before a subscription (the waiting path, never the fast one);
 *   - name(): the server now, for messages and --status (store_name());
 *   - resolve(arg, deadline): look the route's own names up, from store_resolve().
 * Each handle gets its own route state from open(arg) (so routes need no locks);
 * state that must outlive one handle belongs in arg, shared read-only.
 * Redlock (several URLs, cfg->n > 1) is not a route: every call goes to quorum.c,
 * which drives N connections in one poll loop per round (see quorum.h): a backend
 * (backend.h) the front end chooses. */
#ifndef RLOCK_STORE_H
#define RLOCK_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "conncodes.h" /* struct tls_opts */
#include "lock.h"
#include "storecodes.h"

/* The store's own (backend.h), handed through: the configuration of one run, a server
 * behind the seam (--check's nodes). */
struct store_config;
struct server;

/* What the front end says of the servers, once, from the options (frontend.c): the
 * URLs (nurls > 1: a Redlock quorum over urls; else url, maybe a Sentinel URL), how to
 * log in, the deadlines. Read by store_configure() only; url, urls, tls and the strings
 * must outlive the run. */
struct store_ask {
	int nurls;
	const struct url *url, *urls;
	const struct tls_opts *tls;
	const char *user;       /* ACL user, or NULL */
	int has_password;       /* in the vault (secret.h) */
	const char *creds_from; /* where they came from, for messages; or NULL */
	const char *sentinel_user;
	int has_sentinel_password;
	int64_t connect_timeout_ms, io_timeout_ms, node_timeout_ms;
	int64_t ttl_ms; /* the Sentinel route rechecks its master every ttl/4 */
};

/* The connections' process-wide settings, behind the seam (conn.h says each):
 * store_set_abort_fd: in the calling thread, every later wait of the store also ends as
 * soon as fd is readable (-1: none); store_abort_pending: that fd is readable now (a
 * failure just seen may be that interruption); store_tls_init: load the TLS module,
 * before threads start: -1 with why when it is refused as one another user could have
 * written, -2 with why when none loads (missing: an installation fault), -3 with why
 * when RLOCK_TLS_MODULE is not an absolute path (bad input), else 0. */
void store_set_abort_fd(int fd);
int store_abort_pending(void);
int store_tls_init(char *why, size_t n);
/* "hiredis X.Y.Z, OpenSSL ..." or "hiredis X.Y.Z, TLS: unavailable (why)": what
 * --version says of the libraries the store talks through (loads the TLS module). */
void store_libraries(char *buf, size_t len);

/* The run's configuration, from a (no I/O): the servers, and the backend and route
 * that serve them (a Redlock quorum, Sentinel, a Cluster node, or one server as given).
 * Once per process: its storage is a static, filled from zero, never cleared. */
struct store_config *store_configure(const struct store_ask *a);
/* The deadlines it carries (the first server's). */
int64_t store_connect_timeout(const struct store_config *cfg);
int64_t store_io_timeout(const struct store_config *cfg);

struct store;

/* Look the servers' names up once, before the threads start and before deadline_ms
 * (client_resolve()). STORE_OK or STORE_ERR. */
int store_resolve(struct store_config *cfg, int64_t deadline_ms, char *err, size_t errlen);

/* A new handle on cfg (which must outlive it). connect: open a connection now (main:
 * fail early, exit 69; a Redlock quorum also checks that its nodes are distinct
 * servers), else on first use. STORE_OK, STORE_ERR, STORE_DENIED, STORE_USAGE (Redlock
 * nodes that are one server); on failure *out is NULL. */
int store_open(struct store **out, const struct store_config *cfg, int connect, int64_t cap_ms,
               char *err, size_t errlen);
void store_close(struct store *s);

/* True when the last store_open or store_acquire of this thread failed in a way
 * waiting may fix, and in no way it cannot (conn_fault: refused, timed out, LOADING,
 * READONLY, MASTERDOWN, CLUSTERDOWN, TRYAGAIN; not a certificate, a password, a
 * peer that is not Redis). */
int store_fault_passing(void);

/* True when that failure was, among others, one waiting cannot fix (a certificate, a
 * peer that is not Redis). */
int store_fault_final(void);

/* True when that failure was, among others, this host's: no descriptor for a socket,
 * no memory, no thread for a lookup (the caller exits 71, not 69). */
int store_fault_local(void);

/* True when that failure was, among others, a file the user named for the connection
 * that cannot be read or is not of its type (--cacert /etc/hosts): the caller exits 66. */
int store_fault_file(void);

/* True when that failure was, among others, the user's URL wrong for the server (a
 * database but 0 on a Cluster node): the caller exits 64. */
int store_fault_config(void);

/* One look (README: -n fails at once; so do --status, --list, --held, --break, --reset,
 * --history and --check): in the calling thread, while on, a route asks each of its
 * sources once (one pass over the sentinels, each within the connect and io timeouts)
 * and a call tries no server twice, then fails naming what did not answer. Off (the
 * default): a discovery repeats its rounds for its budget and a call follows the route
 * back to a server that failed (what a -w wait and a release after a failover need). */
void store_look_once(int on);

/* True when rc, a failed store_open() of this thread, is the URLs' fault, not the
 * servers': Redlock nodes that are one server, or a Cluster's or a sentinel's among them
 * (STORE_USAGE), or a URL wrong for its server (store_fault_config). The one rule for
 * the run (exit 64) and --check (verdict bad-url). */
int store_refused_url(int rc);

/* In the calling thread only: run fn once, the next time a request of this thread waits
 * for its reply (the request is on its way), then forget it: local work that may
 * overlap a round trip (the command's watchdog during the acquire). NULL forgets it. */
void store_while_waiting(void (*fn)(void));

/* The calling thread is about to sleep (a busy lock's wait): run now what
 * store_while_waiting left, if no round trip ran it yet, and forget it. */
void store_idle_now(void);

/* The server for messages ("127.0.0.1:6379", "3 nodes"). */
const char *store_name(const struct store *s);

/* True when s has a connection that served a call and may serve the next (a failure
 * on it may be an idle connection the server or a NAT dropped: worth one retry). */
int store_connected(const struct store *s);

/* True when s's connection holds a request left unanswered (a timeout): a lock it may
 * have taken can still be given back on it, after that request (store_release); or
 * when the last acquire went out in full and its connection died before the reply (the
 * server may have run it): given back on a fresh one. */
int store_unanswered(const struct store *s);

/* Redlock's clock-drift allowance for a lease of ttl_ms: a quorum's lease counts from
 * that much before its round (store_acquire's *sent_ms). */
int64_t store_drift_ms(int64_t ttl_ms);

/* Try once. LOCK_OK (l->fence set), LOCK_BUSY (*h filled), LOCK_ERR, LOCK_DENIED (see
 * lock.h). *sent_ms: the time from which the lease counts (the send time; for a quorum,
 * moved earlier by the clock-drift allowance): it cannot end before *sent_ms + ttl.
 * cap_ms bounds connecting; the request itself always gets its full io-timeout (one
 * cut short would leave a lock nobody knows to give back). Never retried here (an
 * acquire whose reply was lost may have taken the lock: store_release gives it back). */
int store_acquire(struct store *s, struct lock *l, const struct lock_meta *m, int64_t cap_ms,
                  int64_t *sent_ms, struct holder *h, char *err, size_t errlen);

/* Extend the lease: LOCK_OK (*sent_ms as for store_acquire), LOCK_NOTOURS, LOCK_ERR. */
int store_renew(struct store *s, const struct lock *l, int64_t cap_ms, int64_t *sent_ms, char *err,
                size_t errlen);

/* Give back (keep_ms > 0: let it run keep_ms more, --min-hold): LOCK_OK, LOCK_NOTOURS,
 * LOCK_ERR. */
int store_release(struct store *s, const struct lock *l, int64_t keep_ms, int64_t cap_ms, char *err,
                  size_t errlen);

/* Read every holder and the queue (status) or remove the holders whoever they are
 * (break): LOCK_OK with *h. */
int store_status(struct store *s, const struct lock *l, int64_t cap_ms, struct holders *h,
                 char *err, size_t errlen);
int store_break(struct store *s, const struct lock *l, int64_t cap_ms, struct holders *h, char *err,
                size_t errlen);

/* --history: the newest *n entries of l's history into e (in: room; out: how many),
 * newest first (Redlock: the nodes' merged by fence). LOCK_OK, or an error. */
int store_history(struct store *s, const struct lock *l, int64_t cap_ms, struct history_entry *e,
                  int *n, char *err, size_t errlen);

/* Did token hold l on s once, as its history says (the newest 100 entries: acquired,
 * released, expired, broken...)? 1 yes, 0 no or cannot say. Only then do variables
 * whose token no longer holds l name a lock of s: one key string names the lock of
 * every database, server and Redlock set, and a token s never knew may hold it on
 * another. */
int store_knew_token(struct store *s, const struct lock *l, const char *token, int64_t cap_ms);

/* A waiter gives up: leave the fair queue, drop its writer mark (lock_leave). LOCK_OK,
 * LOCK_SUPERSEDED (--supersede: a newer request had replaced it, *newer says which) or
 * LOCK_ERR. */
int store_leave(struct store *s, const struct lock *l, int64_t cap_ms, struct holder *newer,
                char *err, size_t errlen);

/* Re-entry and --held: 1 when token is a live holder of l now (exclusive, shared or a
 * permit; Redlock: on a majority of the nodes), 0 when not, -1 when the store cannot
 * say (Redlock: too few answers to tell). Reads only. On 1, *hd says how it holds l
 * (lock.h). */
int store_is_holder(struct store *s, const struct lock *l, const char *token, int64_t cap_ms,
                    struct holding *hd, char *err, size_t errlen);

/* After an acquire on this handle: WAIT until n replicas have the writes of its
 * connection (0, or -1 with the reason; fewer than n is a failure). After a failure
 * the connection is closed (the server may still hold it in WAIT). */
int store_wait_replicas(struct store *s, int n, char *err, size_t errlen);

/* --wait-aof: WAITAOF local replicas on the connection that took the lock, within the
 * io-timeout: 0 when the master's AOF (local 1) and `replicas` replicas' AOFs have it
 * fsynced; else -1 with one line (a server without WAITAOF, appendonly off, too few
 * within the time), the connection closed (the server may still hold it in WAITAOF). */
int store_wait_aof(struct store *s, int local, int replicas, char *err, size_t errlen);

/* --list: every lock of prefix held now, on every master (SCAN, then store_status):
 * each(arg, name, l, hs) for each, with its holders (hs->n > 0); first, once the
 * server answered, each(arg, NULL, NULL, NULL). each's non-zero return stops the walk
 * and is returned. The whole walk ends by cap_ms (a deadline, not STORE_NO_CAP): a
 * request it would run past, or a step that starts after it, fails the walk. 0, or -1
 * with the reason. */
int store_list(struct store *s, const char *prefix, int64_t cap_ms,
               int (*each)(void *arg, const char *name, const struct lock *l,
                           const struct holders *hs),
               void *arg, char *err, size_t errlen);

/* The eviction policy of the server(s) of key (a lock's; NULL: the URL's), warned about
 * once a day per server (warn_key: the marker; on a Cluster, per key's slot). Best
 * effort, nothing past cap_ms. */
void store_check_eviction(struct store *s, const char *warn_key, const char *key, int64_t cap_ms);
/* 1 when one run's locks may live on different servers (a TCP URL: a Cluster's masters,
 * known only once a node redirects): each lock's server is checked then (one INFO per
 * server: routed.c), else the first lock's (a Unix socket, Sentinel's one master, the
 * first lock's check looks at every Redlock node). */
int store_locks_spread(const struct store_config *cfg);

/* Learn what the server is behind the URL, where that is not on the command's path
 * (the renewal thread, after its first renewal): a Cluster node's slot map, so that a
 * failover of the URL's own node is followed by the renewal, the release and a waiter
 * of this process. Once per process, best effort, nothing past cap_ms. */
void store_learn(struct store *s, int64_t cap_ms);

/* --check: the k-th node (from 0): the one server, the master the sentinels name, each
 * master of the Cluster's slot map, each Redlock node. NULL after the last, or when the
 * route cannot say (err then set; "" after the last). */
const struct server *store_node(struct store *s, int k, int64_t cap_ms, char *err, size_t errlen);

/* --check: one command on srv (from store_node), on a connection kept for the next call
 * on srv; any reply, an ERROR too, in *reply (free with resp_free). LOCK_OK, LOCK_DENIED
 * (AUTH refused), LOCK_ERR (unreachable, no reply before cap_ms), with the reason. */
int store_node_call(struct store *s, const struct server *srv, int argc, const char **argv,
                    const size_t *lens, int64_t cap_ms, struct resp_reply **reply, char *err,
                    size_t errlen);

/* Release notifications, on a connection of their own: for a waiter with a place
 * (l->placed, after a busy store_acquire) its own wake list, else the release
 * channel(s). subscribe (call it before every sleep; it keeps what still listens):
 * STORE_NEW a new subscription (try again at once: a release before it was not
 * heard), STORE_OK listening (a wake list keeps a push made before it listened),
 * STORE_ERR. fd: poll it for POLLIN (-1 when not listening); check buffered first.
 * read: 1 woken (a release was published, or pushed to the list), 2 woken by a Redlock
 * attempt's give-back (a node freed, no run ended: release.lua), 0 nothing yet (or
 * another message), -1 it broke (closed; subscribe again). subscribe never runs past
 * cap_ms (the waiter's -w deadline; STORE_NO_CAP: none). */
int store_subscribe(struct store *s, const struct lock *l, int64_t cap_ms, char *err,
                    size_t errlen);
int store_notify_fd(const struct store *s);
int store_notify_buffered(const struct store *s);
int store_notify_read(struct store *s, int64_t deadline_ms, char *err, size_t errlen);
void store_unsubscribe(struct store *s);
/* 1 when the subscription is not where the backend would listen now (a quorum's node
 * that the holder no longer has, where its release is not published): subscribe again. */
int store_listener_moved(const struct store *s);
/* The watch, beside the release notifications of a route that can name a new server
 * (Sentinel: +switch-master), opened by store_subscribe (best effort; a watch that
 * cannot open is tried again at most every STORE_WATCH_RETRY_MS) and kept until
 * store_close. fd: -1 when none; check buffered first. read (a message's rest until
 * deadline_ms at most): 1 the server changed
 * (the next request asks the route again: try again, and listen anew), 0 nothing
 * for this lock, -1 the watch broke (closed). */
#define STORE_WATCH_RETRY_MS 10000
int store_watch_fd(const struct store *s);
int store_watch_buffered(const struct store *s);
int store_watch_read(struct store *s, int64_t deadline_ms, char *err, size_t errlen);
void store_unwatch(struct store *s); /* the wait is over: close the watch */
/* 1 once the server refused BLPOP (an ACL that predates wake-one): the waiter listens
 * on the channel from then on, and a place it took before only swallows a wake-up. */
int store_wake_refused(const struct store *s);
/* 1 once SUBSCRIBE was refused (NOPERM: an ACL without the lock's channels) by every
 * server tried: store_subscribe asks no more (STORE_ERR at once, no connection); the
 * waiter polls, on its backoff and the holder's lease end. */
int store_listen_refused(const struct store *s);

#endif
