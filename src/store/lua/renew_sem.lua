-- SPDX-License-Identifier: MIT
-- Renew one shared holder's or permit's lease, only while it is still live by the
-- server's clock. KEYS: holders meta limit   ARGV: token ttl_ms [delay_ms] (delay.lua)
-- [history retention ms] (renew.lua) [mode: shared or N, as acquire_sem.lua's kind]
--@delay
--@here
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not s or tonumber(s) <= now then return 0 end
-- The name's mode (:limit) is this holder's (ARGV[5], or its record's: acquire_sem.lua):
-- another there means a request of another mode got in while the key was lost (evicted,
-- deleted with the records acquire_sem.lua falls back on): the count this holder relies
-- on no longer holds, and it is told so (lost). A key lost alone is written back below.
local ok, m = pcall(cjson.decode, redis.call('HGET', KEYS[2], ARGV[1]) or '')
if not ok or type(m) ~= 'table' then m = nil end
local mode = ARGV[5] and ARGV[5] ~= '' and ARGV[5] or m and m.limit
local lim = redis.call('GET', KEYS[3])
if mode and lim and lim ~= mode then return 0 end
-- --lock-delay's entry moves on: its key first (here.lua), so a refusal does nothing.
if (tonumber(ARGV[3] or '0') or 0) > 0 then here(string.sub(KEYS[1], 1, -9) .. ':delay') end
delay_ready(string.sub(KEYS[1], 1, -9), ARGV[3]) -- its command too (delay.lua)
-- The lease moves on. The first write is the key's PEXPIRE: a full server (maxmemory
-- under noeviction) refuses a script's first write when it needs memory (ZADD: OOM),
-- not the writes that follow one that does not, as renew.lua's PEXPIRE first lets it
-- renew an exclusive holder. (Not ZREM then ZADD: the only holder's ZREM deletes the
-- key, and a slot left MIGRATING refuses the ZADD that would make it again.)
local p = redis.call('PTTL', KEYS[1])
redis.call('PEXPIRE', KEYS[1], p > ttl and p or ttl)
redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[1])
-- The last confirmed renewal (server ms, a string), in the holder's record: --status
-- shows its age (holders.lua).
if m then
  m.renewed = t[1] .. string.sub(string.format('%06d', t[2]), 1, 3)
  redis.call('HSET', KEYS[2], ARGV[1], cjson.encode(m))
end
if mode and not lim then redis.call('SET', KEYS[3], mode, 'PX', ttl) end
for i = 1, 3 do
  local p = redis.call('PTTL', KEYS[i])
  if p == -1 or (p >= 0 and p < ttl) then redis.call('PEXPIRE', KEYS[i], ttl) end
end
delay_hold(string.sub(KEYS[1], 1, -9), ARGV[1], ARGV[2], ARGV[3]) -- less ':holders'
-- The history of a run that outlives its retention (renew.lua): the open runs and the
-- stream stay for the retention after each renewal. Best effort.
local hret = tonumber(ARGV[4] or '0') or 0
for _, k in ipairs(hret > 0 and {':history:run', ':history:runs', ':history'} or {}) do
  local hk = string.sub(KEYS[1], 1, -9) .. k
  local p = redis.pcall('PTTL', hk)
  if type(p) == 'number' and p >= 0 and p < hret then redis.pcall('PEXPIRE', hk, hret) end
end
return 1
