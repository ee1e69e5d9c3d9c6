/* SPDX-License-Identifier: MIT */
/* The front end's side of the seam: the options (cli.h) become the store's config
 * (store.h), once, before anything connects. Nothing below this file reads struct opts. */
#ifndef RLOCK_FRONTEND_H
#define RLOCK_FRONTEND_H

#include "cli.h"
#include "store.h"

/* Fill *cfg from the options (no I/O): the servers, and the backend and route that
 * serve them (a Redlock quorum, Sentinel, a Cluster node, or one server as given). */
void store_config_from_opts(struct store_config *cfg, const struct opts *o);

#endif
