/* SPDX-License-Identifier: MIT */
#include "frontend.h"

#include <string.h>

void store_ask_from_opts(struct store_ask *a, const struct opts *o)
{
	memset(a, 0, sizeof *a);
	a->nurls = o->nurls;
	a->url = o->url;
	a->urls = o->urls;
	a->tls = &o->tls;
	a->user = o->user;
	a->has_password = o->has_password;
	a->creds_from = o->creds_from[0] ? o->creds_from : NULL;
	a->sentinel_user = o->sentinel_user;
	a->has_sentinel_password = o->has_sentinel_password;
	a->connect_timeout_ms = o->connect_timeout_ms;
	a->io_timeout_ms = o->io_timeout_ms;
	a->node_timeout_ms = o->node_timeout_ms;
	a->ttl_ms = o->lock.ttl_ms;
}

void check_ask_from_opts(struct check_ask *a, const struct opts *o)
{
	memset(a, 0, sizeof *a);
	a->server = o->server;
	a->prefix = o->prefix;
	a->json = o->json;
	a->redlock = o->nurls > 1;
	a->sentinels = o->url->nsentinels;
	a->master = o->url->master;
	a->wait_replicas = o->wait_replicas;
	a->wait_aof_local = o->wait_aof_local;
	a->wait_aof_replicas = o->wait_aof_replicas;
	a->tls = o->tls.enabled;
	a->tls_insecure = o->tls.enabled && o->tls.insecure;
	a->connect_timeout_ms = o->connect_timeout_ms;
	a->io_timeout_ms = o->io_timeout_ms;
}

enum lock_mode lock_mode_of(int kind)
{
	return kind == KIND_SHARED ? LOCK_SHARED : kind == KIND_LIMIT ? LOCK_LIMIT : LOCK_EXCLUSIVE;
}

void lock_ask_from_opts(struct lock_ask *a, const struct opts *o)
{
	*a = o->lock; /* what the option table wrote */
	a->prefix = o->prefix;
	a->mode = lock_mode_of(o->kind);
	a->nowait = o->wait_ms == 0;
}

void report_ask_from_opts(struct report_ask *a, const struct opts *o)
{
	memset(a, 0, sizeof *a);
	a->prefix = o->prefix;
	a->name = o->name;
	a->ttl_ms = o->lock.ttl_ms;
	a->history_len = o->lock.history_len;
	a->history_count = o->history_count;
	a->history_ms = o->lock.history_ms;
	a->token = o->token;
	a->if_fence = o->if_fence;
	a->label = o->label;
	a->json = o->json;
	a->conflict_exit = o->conflict_exit;
	a->io_timeout_ms = o->io_timeout_ms;
	a->wait_ms = o->wait_ms;
	a->wait_given_ms = o->wait_given_ms;
	a->sentinels = o->url->nsentinels;
	a->master = o->url->master;
}
