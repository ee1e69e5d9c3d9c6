-- SPDX-License-Identifier: MIT
-- Included (by the build, at a '--@history' line) by the scripts that write a name's
-- history: PREFIX{NAME}:history, a stream of the runs (acquired, and how each ended)
-- and the supersessions, newest last, capped at len entries (exactly below 100, else
-- MAXLEN ~: whole nodes of 100), PEXPIRE ret_ms on every write, so an idle name's
-- stream goes after its retention. len and ret_ms are the holder's (the owner hash's
-- hist and hret, given by its acquire); len 0 (or none): nothing is written.
-- The history is best effort: a user whose ACL lacks +xadd/+xrevrange (or a key of
-- another type) loses the record, never the lock (redis.pcall; --check says so).
-- history_add(lock, len, ret_ms, field, value, ...)
local function history_add(lock, len, ret, ...)
  len = tonumber(len or '0') or 0
  if len <= 0 then return end
  local k = lock .. ':history'
  if len < 100 then
    redis.pcall('XADD', k, 'MAXLEN', len, '*', ...)
  else
    redis.pcall('XADD', k, 'MAXLEN', '~', len, '*', ...)
  end
  ret = tonumber(ret or '0') or 0
  if ret > 0 then redis.pcall('PEXPIRE', k, ret) end
end
-- history_open(lock): the last run's record (its fields: token fence host pid label) if
-- it has no end yet, else nil.
local function history_open(lock)
  local ends = {released = 1, expired = 1, broken = 1, preempted = 1, lost = 1}
  local r = redis.pcall('XREVRANGE', lock .. ':history', '+', '-', 'COUNT', 16)
  if type(r) ~= 'table' or r.err then return nil end
  for _, e in ipairs(r) do
    local f = {}
    for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end
    if f.ev == 'acquired' then return f end
    if ends[f.ev] then return nil end
  end
  return nil
end
