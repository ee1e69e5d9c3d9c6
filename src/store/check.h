/* SPDX-License-Identifier: MIT */
/* --check: is the deployment set up so that a lock can be trusted? Every node behind
 * the seam (the one server, the Sentinel master, each Cluster master, each Redlock
 * node) is asked, read-only: reachability and round trip, version and the scripts,
 * maxmemory-policy, persistence, role and replicas, topology (and a Sentinel URL's
 * sentinels: answered, master known, CKQUORUM), the clock offset, the
 * ACL rights rlock needs. One line per finding (ok, warn, unsafe: the fact and the
 * fix), then a verdict; or one JSON object. Nothing is changed; a right tried without
 * ACL DRYRUN uses a throwaway key under the prefix, deleted at once. */
#ifndef RLOCK_CHECK_H
#define RLOCK_CHECK_H

#include "frontend.h"

/* Resolve, open, check every node, print. 0 all ok, 1 warnings only, 2 unsafe, 69 no
 * node reachable, 74 the output cannot be written. */
int check_run(struct store_config *cfg, const struct opts *o);

#endif
