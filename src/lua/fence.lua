-- SPDX-License-Identifier: MIT
-- Fence (Redlock): raise the fence counter to ARGV[1] if it is lower (a max-merge), so
-- that every later majority, which shares a node with this one, counts past it.
-- KEYS: fence   ARGV: value
local v = tonumber(redis.call('GET', KEYS[1])) or 0
local f = tonumber(ARGV[1])
if f > v then
  redis.call('SET', KEYS[1], ARGV[1])
  return f
end
return v
