-- SPDX-License-Identifier: MIT
-- Release: delete only our own lock and wake waiters in the same step, so no
-- waiter can miss the notification; with keep_ms > 0 (--min-hold) let it expire.
-- With a fair queue, only its head is woken (its own channel), not everyone.
-- KEYS: lock owner   ARGV: token keep_ms channel publish wake_prefix
-- (publish: PUBLISH, or SPUBLISH in a Redis >= 7 cluster)
-- The queue (KEYS[1]..':queue', same hash tag) is not declared: a slot being migrated
-- answers a script whose declared keys are not all present with TRYAGAIN, and the
-- queue of a plain lock usually does not exist.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if tonumber(ARGV[2]) > 0 then
  -- Marked, so that --status says the command has exited (not a stuck lock to break).
  redis.call('HSET', KEYS[2], 'kept', '1')
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return 2
end
redis.call('DEL', KEYS[1], KEYS[2])
local head = redis.call('ZRANGE', KEYS[1] .. ':queue', 0, 0)[1]
if head then
  redis.call(ARGV[4], ARGV[5] .. head, ARGV[1])
else
  redis.call(ARGV[4], ARGV[3], ARGV[1])
end
return 1
