-- SPDX-License-Identifier: MIT
-- Release: delete only our own lock and wake waiters in the same step, so no
-- waiter can miss the notification; with keep_ms > 0 (--min-hold) let it expire.
-- With a fair queue, only its head is woken (its own channel); else one plain waiter
-- (wake_one.lua), and the release channel is told for everyone else who listens there
-- (requests of other modes, Redlock waiters, older rlocks).
-- KEYS: lock owner   ARGV: token keep_ms channel publish wake_prefix [done_ms]
-- (publish: PUBLISH, or SPUBLISH in a Redis >= 7 cluster)
-- done_ms > 0 (--once-per, the command succeeded): mark the name done for done_ms,
-- PREFIX{NAME}:done = the holder's fence, in this same step, only while the lock is ours.
-- The queue, the waiters and the mark (KEYS[1]..':queue', ':waiters', ':done', same
-- hash tag) are not declared: a slot being migrated answers a script whose declared keys are not all
-- present with TRYAGAIN, and they usually do not exist.
--@wake_one
--@delay
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
delay_open(KEYS[1], ARGV[1]) -- released (--min-hold's keep too): no lock-delay
if tonumber(ARGV[6] or '0') > 0 then
  redis.call('SET', KEYS[1] .. ':done', redis.call('HGET', KEYS[2], 'fence') or '0', 'PX', ARGV[6])
end
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
  local t = redis.call('TIME')
  wake_one(KEYS[1], ARGV[5], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), 'release')
  redis.call(ARGV[4], ARGV[3], ARGV[1])
end
return 1
