/* SPDX-License-Identifier: MIT */
/* Unit tests for src/store/cluster.c: key slots against a real node's CLUSTER KEYSLOT
 * (Redis 7.0.15), redirect parsing, and the slot map from a CLUSTER SLOTS reply. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"

#include "unit.h"

static unsigned slot(const char *k)
{
	return cluster_keyslot(k, strlen(k));
}

static void test_keyslot(void)
{
	/* Asked of a real node with CLUSTER KEYSLOT. */
	CHECK(slot("a") == 15495);
	CHECK(slot("b") == 3300);
	CHECK(slot("c") == 7365);
	CHECK(slot("foo") == 12182);
	CHECK(slot("123456789") == 12739); /* the cluster spec's CRC16 check value 0x31C3 */
	CHECK(slot("rlock:{x}") == 16287);
	CHECK(slot("rlock:{x}:fence") == 16287); /* the hash tag: one lock, one slot */
	CHECK(slot("{user1000}.following") == 3443);
	CHECK(slot("foo{}{bar}") == 8363); /* an empty tag: the whole key */
	CHECK(slot("{}") == 15257);
	CHECK(slot("a{b") == 13340); /* no closing brace: the whole key */
	CHECK(slot("") == 0);
	CHECK(cluster_keyslot("x{y}\0z", 6) == slot("y"));
}

static void test_redirect(void)
{
	struct cluster_addr a;
	unsigned s = 0;
	int ask = -1;

	CHECK(cluster_parse_redirect("MOVED 3999 127.0.0.1:6381", &ask, &s, &a) == 1);
	CHECK(ask == 0 && s == 3999 && strcmp(a.host, "127.0.0.1") == 0 && a.port == 6381);
	CHECK(cluster_parse_redirect("ASK 16383 ::1:7000", &ask, &s, &a) == 1);
	CHECK(ask == 1 && s == 16383 && strcmp(a.host, "::1") == 0 && a.port == 7000);
	CHECK(cluster_parse_redirect("MOVED 1 :6380", &ask, &s, &a) == 1);
	CHECK(a.host[0] == '\0' && a.port == 6380);
	CHECK(cluster_parse_redirect("MOVED 16384 h:1", &ask, &s, &a) == -1);
	CHECK(cluster_parse_redirect("MOVED 1 h:0", &ask, &s, &a) == -1);
	CHECK(cluster_parse_redirect("MOVED 1 h:65536", &ask, &s, &a) == -1);
	CHECK(cluster_parse_redirect("MOVED 1 h", &ask, &s, &a) == -1);
	CHECK(cluster_parse_redirect("MOVED -1 h:1", &ask, &s, &a) == -1);
	CHECK(cluster_parse_redirect("MOVED", &ask, &s, &a) == -1);
	CHECK(cluster_parse_redirect("MOVEDX 1 h:1", &ask, &s, &a) == 0);
	CHECK(cluster_parse_redirect("ERR MOVED 1 h:1", &ask, &s, &a) == 0);
	CHECK(cluster_parse_redirect("CLUSTERDOWN The cluster is down", &ask, &s, &a) == 0);
	CHECK(cluster_error_is("TRYAGAIN Multiple keys request during rehashing", "TRYAGAIN"));
	CHECK(cluster_error_is("CLUSTERDOWN", "CLUSTERDOWN"));
	CHECK(!cluster_error_is("CLUSTERDOWNX", "CLUSTERDOWN"));
	CHECK(!cluster_error_is(NULL, "ASK"));
}

/* Reply building, for the map tests. */
static struct resp_reply *mk(enum resp_type t)
{
	struct resp_reply *r = calloc(1, sizeof *r);
	r->type = t;
	return r;
}

static struct resp_reply *num(long long v)
{
	struct resp_reply *r = mk(RESP_INTEGER);
	r->integer = v;
	return r;
}

static struct resp_reply *str(const char *s)
{
	struct resp_reply *r = mk(RESP_STRING);
	r->str = strdup(s);
	r->len = strlen(s);
	return r;
}

static struct resp_reply *arr(size_t n, struct resp_reply **e)
{
	struct resp_reply *r = mk(RESP_ARRAY);
	r->elements = n;
	r->element = calloc(n ? n : 1, sizeof *r->element);
	for (size_t i = 0; i < n; i++)
		r->element[i] = e[i];
	return r;
}

static struct resp_reply *node(const char *host, long long port, int v7)
{
	struct resp_reply *e[] = {str(host), num(port), str("f7259d1bc0e009c5c98f7a52303fe47c"),
	                          v7 ? arr(0, NULL) : NULL};
	return arr(v7 ? 4 : 3, e);
}

static struct resp_reply *range(long long from, long long to, struct resp_reply *master,
                                struct resp_reply *replica)
{
	struct resp_reply *e[] = {num(from), num(to), master, replica};
	return arr(replica ? 4 : 3, e);
}

static void test_map(void)
{
	static struct cluster_map m;
	struct cluster_addr asked = {"10.0.0.9", 7009};
	char err[200];

	cluster_map_init(&m);
	CHECK(cluster_map_master(&m, 0) == -1);
	struct resp_reply *e[] = {
	    range(0, 5460, node("127.0.0.1", 7000, 1), node("127.0.0.1", 7003, 1)),
	    range(5461, 10922, node("", 7001, 1), NULL),
	    range(10923, 16383, node("127.0.0.1", 7002, 1), node("127.0.0.1", 7004, 1)),
	};
	struct resp_reply *r = arr(3, e);
	CHECK(cluster_map_parse(&m, r, &asked, err, sizeof err) == 0);
	CHECK(m.n == 3 && m.sharded);
	CHECK(m.owner[0] == 0 && m.owner[5460] == 0 && m.owner[5461] == 1 && m.owner[16383] == 2);
	CHECK(strcmp(m.node[1].host, "10.0.0.9") == 0 && m.node[1].port == 7001);
	CHECK(cluster_map_master(&m, 0) == 0 && cluster_map_master(&m, 2) == 2);
	CHECK(cluster_map_master(&m, 3) == -1);
	resp_free(r);

	/* After a failover, 7003 serves 0-5460: 7000 stays known, serves nothing. Redis 6's
	 * three-element node entries: no sharded pub/sub. */
	struct resp_reply *e2[] = {range(0, 16383, node("127.0.0.1", 7003, 0), NULL)};
	r = arr(1, e2);
	CHECK(cluster_map_parse(&m, r, &asked, err, sizeof err) == 0);
	CHECK(m.n == 4 && m.owner[0] == 3 && m.owner[16383] == 3 && !m.sharded);
	CHECK(cluster_map_master(&m, 0) == 3 && cluster_map_master(&m, 1) == -1);
	resp_free(r);

	/* Malformed replies leave the map as it was. */
	struct resp_reply *bad[] = {
	    arr(0, NULL),
	    str("x"),
	    arr(1, (struct resp_reply *[]){range(0, 16384, node("h", 1, 1), NULL)}),
	    arr(1, (struct resp_reply *[]){range(5, 4, node("h", 1, 1), NULL)}),
	    arr(1, (struct resp_reply *[]){range(0, 1, node("h", 0, 1), NULL)}),
	    arr(1, (struct resp_reply *[]){range(0, 1, num(3), NULL)}),
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		CHECK(cluster_map_parse(&m, bad[i], &asked, err, sizeof err) == -1);
		CHECK(err[0] && !strchr(err, '\n'));
		CHECK(m.n == 4 && m.owner[0] == 3);
		resp_free(bad[i]);
	}

	/* Bounded: more masters than the map keeps is refused. */
	struct resp_reply *many[CLUSTER_NODES_MAX + 1];
	for (int i = 0; i <= CLUSTER_NODES_MAX; i++)
		many[i] = range(i, i, node("127.0.0.1", 10000 + i, 1), NULL);
	cluster_map_init(&m);
	r = arr(CLUSTER_NODES_MAX + 1, many);
	CHECK(cluster_map_parse(&m, r, &asked, err, sizeof err) == -1);
	CHECK(strstr(err, "more than") != NULL && m.n == 0);
	resp_free(r);
}

int main(void)
{
	test_keyslot();
	test_redirect();
	test_map();
	printf("unit_cluster: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
