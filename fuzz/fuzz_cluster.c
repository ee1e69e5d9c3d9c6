/* SPDX-License-Identifier: MIT */
/* Fuzz what rlock reads from Cluster nodes (cluster.c): the bytes go through the real
 * reply reader (resp.c) and each reply into the slot map (cluster_map_parse), each
 * error reply's text into the redirect parser; the input itself is also a key.
 * Properties: no crash; every slot owner is a node index the map holds; a parsed
 * redirect has a slot below 16384, a port in 1..65535 and a terminated host. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "resp.h"

static struct cluster_map map;

static void check_map(void)
{
	if (map.n < 0 || map.n > CLUSTER_NODES_MAX)
		abort();
	for (int s = 0; s < CLUSTER_SLOTS; s++)
		if (map.owner[s] < -1 || map.owner[s] >= map.n)
			abort();
	for (int i = 0; i < map.n; i++)
		if (!memchr(map.node[i].host, '\0', sizeof map.node[i].host) ||
		    map.node[i].port < 1 || map.node[i].port > 65535)
			abort();
}

static void check_redirect(const char *text)
{
	struct cluster_addr a;
	unsigned slot = 0;
	int ask = 0;

	if (cluster_parse_redirect(text, &ask, &slot, &a) == 1 &&
	    (slot >= CLUSTER_SLOTS || a.port < 1 || a.port > 65535 ||
	     !memchr(a.host, '\0', sizeof a.host)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cluster_addr asked = {"127.0.0.1", 7000};
	struct resp_reader *rd = resp_reader_new();
	char err[256];

	if (cluster_keyslot((const char *)data, size) >= CLUSTER_SLOTS)
		abort();
	if (!rd)
		return 0;
	cluster_map_init(&map);
	if (resp_reader_feed(rd, (const char *)data, size) == 0) {
		for (int i = 0; i < 16; i++) {
			struct resp_reply *r = NULL;
			if (resp_reader_get(rd, &r, err, sizeof err) != 1)
				break;
			(void)cluster_map_parse(&map, r, &asked, err, sizeof err);
			check_map();
			if (r->type == RESP_ERROR)
				check_redirect(r->str);
			resp_free(r);
		}
	}
	resp_reader_free(rd);
	return 0;
}
