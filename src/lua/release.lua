-- SPDX-License-Identifier: MIT
-- Release: delete only our own lock and wake waiters in the same step, so no
-- waiter can miss the notification; with keep_ms > 0 (--min-hold) let it expire.
-- KEYS: lock owner   ARGV: token keep_ms channel
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if tonumber(ARGV[2]) > 0 then
  -- Marked, so that --status says the command has exited (not a stuck lock to break).
  redis.call('HSET', KEYS[2], 'kept', '1')
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return 2
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('PUBLISH', ARGV[3], ARGV[1])
return 1
