-- SPDX-License-Identifier: MIT
-- Fence (Redlock): raise the fence counter to ARGV[1] if it is lower (a max-merge), so
-- that every later majority, which shares a node with this one, counts past it.
-- Compared as 64-bit integers in strings, never as Lua numbers (counter.lua).
-- KEYS: fence lock owner   ARGV: value (a 64-bit integer) token
-- Reply: the counter after, a string
-- Where token holds the lock, its owner record's fence is raised to value too: the
-- record says the fence the holder got (RLOCK_FENCE), not this node's own count, so
-- that --status, --held and a nested run's RLOCK_FENCE read it from any node, also once
-- the nodes that counted it are gone (restarted: a rolling restart).
--@counter
if not int64(ARGV[1]) then return redis.error_reply('RLOCKFENCE not a 64-bit integer') end
local v = redis.call('GET', KEYS[1])
if v and not int64(v) then
  return redis.error_reply('RLOCKFENCE the fence counter ' .. KEYS[1] ..
                           ' does not hold a 64-bit integer')
end
if not v or int64_less(v, ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
  v = ARGV[1]
end
if ARGV[2] and redis.call('GET', KEYS[2]) == ARGV[2] then
  local f = redis.call('HGET', KEYS[3], 'fence')
  if f and int64(f) and int64_less(f, ARGV[1]) then redis.call('HSET', KEYS[3], 'fence', ARGV[1]) end
end
return v
