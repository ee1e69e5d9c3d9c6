/* SPDX-License-Identifier: MIT */
/* The store's configuration, built once from what the front end asks (store_ask):
 * the servers, and the backend and route that serve them. */
#include "backend.h"
#include "store.h"

#include <stdio.h>
#include <string.h>

#include "cluster.h"
#include "quorum.h"
#include "sentinel.h"

/* The run's configuration, and the Sentinel route's context: like the options, built
 * once here and read-only once the threads start (store_resolve() looks its names up
 * before). */
static struct store_config config;
static struct sentinel_route sentinel;

struct store_config *store_configure(const struct store_ask *a)
{
	/* Once per process: the static starts zero and is not cleared (its 24 KiB, most of
	 * them never touched by one server, are not written and faulted in for nothing). */
	struct store_config *cfg = &config;

	cfg->n = a->nurls > 1 ? a->nurls : 1;
	cfg->node_timeout_ms = a->node_timeout_ms;
	for (int i = 0; i < cfg->n; i++) {
		struct server *srv = &cfg->srv[i];
		const struct url *u = a->nurls > 1 ? &a->urls[i] : a->url;
		srv->tls = *a->tls;
		if (u->scheme == URL_UNIX) {
			srv->ep.path = u->path;
			snprintf(srv->name, sizeof srv->name, "%s", u->path);
		} else {
			srv->ep.host = u->host;
			srv->ep.port = u->port;
			srv->ep.tls = &srv->tls;
			snprintf(srv->name, sizeof srv->name,
			         strchr(u->host, ':') ? "[%s]:%d" : "%s:%d", u->host, u->port);
		}
		srv->user = a->user;
		srv->has_password = a->has_password;
		srv->creds_from = a->creds_from;
		srv->db = u->db;
		srv->identify = cfg->n > 1;
		srv->connect_timeout_ms = a->connect_timeout_ms;
		srv->io_timeout_ms = a->io_timeout_ms;
	}
	/* One TCP server may be a Cluster node: the route costs nothing until a MOVED.
	 * Sentinel URLs name sentinels, not the server: their own route. */
	if (cfg->n > 1) {
		cfg->backend = &quorum_backend;
	} else if (a->url->nsentinels) {
		sentinel_init(&sentinel.s, a->url, a->tls, a->sentinel_user,
		              a->has_sentinel_password, a->connect_timeout_ms, a->io_timeout_ms);
		sentinel_route_config(cfg, &sentinel, a->ttl_ms / 4);
	} else if (cfg->n == 1 && a->url->scheme != URL_UNIX) {
		cfg->route = &cluster_route;
		cfg->route_arg = &cfg->srv[0];
	}
	return cfg;
}

int64_t store_connect_timeout(const struct store_config *cfg)
{
	return cfg->srv[0].connect_timeout_ms;
}

int64_t store_io_timeout(const struct store_config *cfg)
{
	return cfg->srv[0].io_timeout_ms;
}
