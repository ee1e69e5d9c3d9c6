/* SPDX-License-Identifier: MIT */
#include "frontend.h"

#include <stdio.h>
#include <string.h>

#include "cluster.h"
#include "quorum.h"
#include "sentinel.h"

/* The Sentinel route's context: like the options, built once here and read-only once
 * the threads start (store_resolve() looks its names up before). */
static struct sentinel_route sentinel;

void store_config_from_opts(struct store_config *cfg, const struct opts *o)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->n = o->nurls > 1 ? o->nurls : 1;
	cfg->node_timeout_ms = o->node_timeout_ms;
	for (int i = 0; i < cfg->n; i++) {
		struct server *srv = &cfg->srv[i];
		const struct url *u = o->nurls > 1 ? &o->urls[i] : &o->url;
		srv->tls = o->tls;
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
		srv->user = o->user;
		srv->has_password = o->has_password;
		srv->creds_from = o->creds_from[0] ? o->creds_from : NULL;
		srv->db = u->db;
		srv->identify = cfg->n > 1;
		srv->connect_timeout_ms = o->connect_timeout_ms;
		srv->io_timeout_ms = o->io_timeout_ms;
	}
	/* One TCP server may be a Cluster node: the route costs nothing until a MOVED.
	 * Sentinel URLs name sentinels, not the server: their own route. */
	if (cfg->n > 1) {
		cfg->backend = &quorum_backend;
	} else if (o->url.nsentinels) {
		sentinel_init(&sentinel.s, &o->url, &o->tls, o->sentinel_user,
		              o->has_sentinel_password, o->connect_timeout_ms, o->io_timeout_ms);
		sentinel_route_config(cfg, &sentinel, o->ttl_ms / 4);
	} else if (cfg->n == 1 && o->url.scheme != URL_UNIX) {
		cfg->route = &cluster_route;
		cfg->route_arg = &cfg->srv[0];
	}
}
