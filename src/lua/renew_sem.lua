-- SPDX-License-Identifier: MIT
-- Renew one shared holder's or permit's lease, only while it is still live by the
-- server's clock. KEYS: holders meta limit   ARGV: token ttl_ms [delay_ms] (delay.lua)
--@delay
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not s or tonumber(s) <= now then return 0 end
redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[1])
for i = 1, 3 do
  local p = redis.call('PTTL', KEYS[i])
  if p == -1 or (p >= 0 and p < ttl) then redis.call('PEXPIRE', KEYS[i], ttl) end
end
delay_hold(string.sub(KEYS[1], 1, -9), ARGV[1], ARGV[2], ARGV[3]) -- less ':holders'
return 1
