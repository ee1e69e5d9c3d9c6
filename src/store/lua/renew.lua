-- SPDX-License-Identifier: MIT
-- Renew: extend the lease only while the token is still the holder.
-- KEYS: lock owner   ARGV: token ttl_ms [delay_ms: --lock-delay's entry moves on too
-- [history retention ms: the open run and the stream stay while the run does]]
--@delay
--@here
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
-- --lock-delay's entry moves on: its key first (here.lua), so a refusal does nothing.
if (tonumber(ARGV[3] or '0') or 0) > 0 then here(KEYS[1] .. ':delay') end
delay_ready(KEYS[1], ARGV[3]) -- its command too (delay.lua)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
-- The last confirmed renewal, server ms as a string (never a Lua number), in the
-- holder's record (only while it exists: a record written here would have no TTL):
-- --status shows its age (holders.lua).
if redis.call('PEXPIRE', KEYS[2], ARGV[2]) == 1 then
  local t = redis.call('TIME')
  redis.call('HSET', KEYS[2], 'renewed', t[1] .. string.sub(string.format('%06d', t[2]), 1, 3))
end
delay_hold(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
-- The history (history.lua) of a run that outlives its retention: its open run and the
-- stream stay for the retention after each renewal, so its end is recorded against its
-- acquire. Best effort, as every history write.
local hret = tonumber(ARGV[4] or '0') or 0
for _, k in ipairs(hret > 0 and {':history:run', ':history'} or {}) do
  local p = redis.pcall('PTTL', KEYS[1] .. k)
  if type(p) == 'number' and p >= 0 and p < hret then redis.pcall('PEXPIRE', KEYS[1] .. k, hret) end
end
-- A --preemptible holder that a --preempt request marked: renewed, and told who asked
-- ({3, host, pid, label}); it stops its command and releases. Read with redis.pcall
-- (here.lua): not on this node while the slot migrates is no request yet.
if redis.call('HGET', KEYS[2], 'preemptible') == '1' then
  local by = redis.pcall('HMGET', KEYS[1] .. ':preempt', 'host', 'pid', 'label')
  if by[1] then return {3, by[1], by[2] or false, by[3] or false} end
end
return 1
