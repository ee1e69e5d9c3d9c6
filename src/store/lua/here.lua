-- SPDX-License-Identifier: MIT
-- Included (by the build, at a '--@here' line) by the scripts that touch keys other than
-- those they declare (the name's other keys, same hash tag). Redis Cluster, a slot being
-- resharded: on the node the slot migrates from, a command on a key that is not there
-- (never created, or moved already) is refused ("Script attempted to access a non local
-- key in a cluster node"), and Redis keeps what the script wrote before it. So:
-- - here(k, ...) touches each key a step creates or must change (EXISTS, one key a
--   call: the node the slot migrates to serves single keys after ASKING) before the
--   script's first write: a refusal comes before anything is done, and rlock tries
--   again as on TRYAGAIN (cluster.c), or says it could not;
-- - what only informs or tidies (a request to notice, a waiter to wake, a place or an
--   entry to drop) is read or removed with redis.pcall: a refusal means "not on this
--   node", nothing to do here;
-- - every wake-up published (PUBLISH, SPUBLISH) goes with redis.pcall too, whatever the
--   script wrote before it: a user without channel rights (Redis 7's default for a new
--   user, acl-pubsub-default resetchannels) is refused it, and an error reply would hide
--   the grant, release or break done (Redis keeps it). Its waiters, refused SUBSCRIBE
--   too, try again on their own timer.
-- Declared keys Redis checks itself before the script runs (TRYAGAIN unless all of
-- them are on one node).
local function here(...)
  for i = 1, select('#', ...) do
    local k = select(i, ...)
    if k then redis.call('EXISTS', k) end
  end
end
