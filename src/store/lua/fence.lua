-- SPDX-License-Identifier: MIT
-- Fence (Redlock): raise the fence counter to ARGV[1] if it is lower (a max-merge), so
-- that every later majority, which shares a node with this one, counts past it.
-- Compared as 64-bit integers in strings, never as Lua numbers (counter.lua).
-- KEYS: fence   ARGV: value (a 64-bit integer)   Reply: the counter after, a string
--@counter
if not int64(ARGV[1]) then return redis.error_reply('RLOCKFENCE not a 64-bit integer') end
local v = redis.call('GET', KEYS[1])
if v and not int64(v) then
  return redis.error_reply('RLOCKFENCE the fence counter ' .. KEYS[1] ..
                           ' does not hold a 64-bit integer')
end
if not v or int64_less(v, ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
  return ARGV[1]
end
return v
