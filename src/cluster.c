#include "cluster.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), the one Redis Cluster uses.
 * Bit by bit: lock names are short, and this is easy to check against the spec. */
static unsigned crc16(const char *buf, size_t len)
{
	unsigned crc = 0;

	for (size_t i = 0; i < len; i++) {
		crc ^= (unsigned)(unsigned char)buf[i] << 8;
		for (int b = 0; b < 8; b++)
			crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
		crc &= 0xffff;
	}
	return crc;
}

unsigned cluster_keyslot(const char *key, size_t len)
{
	const char *open = memchr(key, '{', len);

	if (open) {
		size_t from = (size_t)(open - key) + 1;
		const char *close = memchr(key + from, '}', len - from);
		if (close && close > key + from)
			return crc16(key + from, (size_t)(close - (key + from))) % CLUSTER_SLOTS;
	}
	return crc16(key, len) % CLUSTER_SLOTS;
}

int cluster_error_is(const char *errtext, const char *code)
{
	size_t n = strlen(code);

	return errtext && strncmp(errtext, code, n) == 0 && (errtext[n] == ' ' || !errtext[n]);
}

/* "host:port" (host may be empty or an IPv6 literal: the port follows the last ':'). */
static int parse_addr(const char *s, struct cluster_addr *a)
{
	const char *colon = strrchr(s, ':');
	char *end;

	if (!colon || (size_t)(colon - s) >= sizeof a->host)
		return -1;
	errno = 0;
	long port = strtol(colon + 1, &end, 10);
	if (errno || end == colon + 1 || *end || port < 1 || port > 65535)
		return -1;
	memcpy(a->host, s, (size_t)(colon - s));
	a->host[colon - s] = '\0';
	a->port = (int)port;
	return 0;
}

int cluster_parse_redirect(const char *errtext, int *ask, unsigned *slot, struct cluster_addr *to)
{
	char *end;

	if (cluster_error_is(errtext, "MOVED"))
		*ask = 0;
	else if (cluster_error_is(errtext, "ASK"))
		*ask = 1;
	else
		return 0;
	const char *p = strchr(errtext, ' ');
	if (!p || p[1] < '0' || p[1] > '9')
		return -1;
	errno = 0;
	unsigned long s = strtoul(p + 1, &end, 10);
	if (errno || *end != ' ' || s >= CLUSTER_SLOTS || parse_addr(end + 1, to) < 0)
		return -1;
	*slot = (unsigned)s;
	return 1;
}

void cluster_map_init(struct cluster_map *m)
{
	memset(m, 0, sizeof *m);
	for (int i = 0; i < CLUSTER_SLOTS; i++)
		m->owner[i] = -1;
}

int cluster_map_node(struct cluster_map *m, const struct cluster_addr *a)
{
	for (int i = 0; i < m->n; i++)
		if (m->node[i].port == a->port && strcmp(m->node[i].host, a->host) == 0)
			return i;
	if (m->n == CLUSTER_NODES_MAX)
		return -1;
	m->node[m->n] = *a;
	return m->n++;
}

static int slot_number(const struct resp_reply *r, long long *v)
{
	if (r->type != RESP_INTEGER || r->integer < 0 || r->integer >= CLUSTER_SLOTS)
		return -1;
	*v = r->integer;
	return 0;
}

/* A node entry [host, port, id, meta?] into *a. */
static int node_addr(const struct resp_reply *e, const struct cluster_addr *asked,
                     struct cluster_addr *a)
{
	if (e->type != RESP_ARRAY || e->elements < 2 || e->element[0]->type != RESP_STRING ||
	    e->element[1]->type != RESP_INTEGER || e->element[1]->integer < 1 ||
	    e->element[1]->integer > 65535 || e->element[0]->len >= sizeof a->host)
		return -1;
	/* "" and "?" (an unknown endpoint): the node that was asked is the best guess. */
	if (e->element[0]->len == 0 || strcmp(e->element[0]->str, "?") == 0)
		snprintf(a->host, sizeof a->host, "%s", asked->host);
	else
		snprintf(a->host, sizeof a->host, "%s", e->element[0]->str);
	a->port = (int)e->element[1]->integer;
	return 0;
}

int cluster_map_parse(struct cluster_map *m, const struct resp_reply *r,
                      const struct cluster_addr *asked, char *err, size_t errlen)
{
	struct cluster_map *next = malloc(sizeof *next);
	int sharded = 1;

	if (!next) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	*next = *m;
	for (int i = 0; i < CLUSTER_SLOTS; i++)
		next->owner[i] = -1;
	if (r->type != RESP_ARRAY || r->elements == 0) {
		snprintf(err, errlen, "CLUSTER SLOTS: %s",
		         r->type == RESP_ARRAY ? "no slot is served (cluster not set up?)"
		                               : "unexpected reply");
		goto fail;
	}
	for (size_t i = 0; i < r->elements; i++) {
		const struct resp_reply *e = r->element[i];
		struct cluster_addr a;
		long long from, to;
		if (e->type != RESP_ARRAY || e->elements < 3 || slot_number(e->element[0], &from) ||
		    slot_number(e->element[1], &to) || from > to ||
		    node_addr(e->element[2], asked, &a) < 0) {
			snprintf(err, errlen, "CLUSTER SLOTS: unexpected reply");
			goto fail;
		}
		int idx = cluster_map_node(next, &a);
		if (idx < 0) {
			snprintf(err, errlen, "CLUSTER SLOTS: more than %d masters",
			         CLUSTER_NODES_MAX);
			goto fail;
		}
		for (long long s = from; s <= to; s++)
			next->owner[s] = (int16_t)idx;
		sharded &= e->element[2]->elements >= 4;
	}
	next->sharded = sharded;
	*m = *next;
	free(next);
	return 0;
fail:
	free(next);
	return -1;
}

int cluster_map_master(const struct cluster_map *m, int i)
{
	for (int n = 0; n < m->n; n++) {
		int serves = 0;
		for (int s = 0; s < CLUSTER_SLOTS && !serves; s++)
			serves = m->owner[s] == n;
		if (serves && i-- == 0)
			return n;
	}
	return -1;
}
