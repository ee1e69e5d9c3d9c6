-- SPDX-License-Identifier: MIT
-- Included (by the build, at a '--@holders' line) by status.lua and break.lua: every
-- live holder (the exclusive one, shared holders or permits, live by the server's
-- clock) into hs, 14 fields each (mode token pttl host pid user cmd start ttl fence
-- kept label renewed_ago: ms since the last confirmed renewal, by the server's clock;
-- proc: the holder's boot id and pid namespace, as recorded, or false in older records),
-- n the total (hs keeps 33 at most); now, lim as read; fence the counter as
-- stored (a string, never a Lua number; 0 when absent, as INCR counts; false when it
-- cannot be read: a key of another type).
-- KEYS: lock owner fence holders meta limit (as both scripts')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lim = redis.call('GET', KEYS[6])
local fence = redis.pcall('GET', KEYS[3])
if type(fence) == 'table' then fence = false elseif not fence then fence = 0 end
local hs, n = {}, 0
local function add(mode, tok, pttl, o)
  local renewed = tonumber(o[10] or '')
  local row = {mode, tok, pttl, o[1] or false, o[2] or false, o[3] or false, o[4] or false,
               o[5] or false, o[6] or false, o[7] or false, o[8] or false, o[9] or false,
               renewed and now - renewed or false, o[11] or false}
  for i = 1, 14 do hs[#hs + 1] = row[i] end
end
local tok = redis.call('GET', KEYS[1])
if tok then
  n = 1
  add('x', tok, redis.call('PTTL', KEYS[1]), redis.call('HMGET', KEYS[2], 'host', 'pid', 'user',
      'cmd', 'start', 'ttl', 'fence', 'kept', 'label', 'renewed', 'proc'))
end
n = n + redis.call('ZCOUNT', KEYS[4], '(' .. now, '+inf')
local live = redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 32)
-- the mode key lost alone (evicted, deleted): the holders' records say it (acquire_sem.lua)
if not lim and live[1] then
  local ok, m = pcall(cjson.decode, redis.call('HGET', KEYS[5], live[1]) or '{}')
  lim = ok and type(m) == 'table' and type(m.limit) == 'string' and m.limit or false
end
for i = 1, #live, 2 do
  local ok, m = pcall(cjson.decode, redis.call('HGET', KEYS[5], live[i]) or '{}')
  if not ok or type(m) ~= 'table' then m = {} end
  add(lim == 'shared' and 's' or 'l', live[i], tonumber(live[i + 1]) - now,
      {m.host, m.pid, m.user, m.cmd, m.start, m.ttl, m.fence, m.kept, m.label, m.renewed,
       m.proc})
end
-- broken_record(lock, now): the last --break's record PREFIX{NAME}:broken (break.lua)
-- as {host, pid, user, ms_ago, tokens (the broken holders', space-separated), fence,
-- label (the breaker's --label)},
-- or false when there is none. The key is not declared (release.lua says why).
local function broken_record(lock, now)
  local b = redis.call('HMGET', lock .. ':broken', 'host', 'pid', 'user', 'at', 'tokens', 'fence',
                       'label')
  local at = tonumber(b[4] or '')
  if not at then return false end
  return {b[1] or false, b[2] or false, b[3] or false, now - at, b[5] or false, b[6] or false,
          b[7] or false}
end
-- A --preempt reservation (PREFIX{NAME}:preempt, not declared, with handover 1:
-- release.lua) as {token, host, pid, label, pttl}, or false; and the fields read
-- (handover token host pid label, then ...).
local function reservation(lock, ...)
  local pk = lock .. ':preempt'
  local ho = redis.pcall('HMGET', pk, 'handover', 'token', 'host', 'pid', 'label', ...)
  if type(ho) ~= 'table' or ho[1] ~= '1' then return false, ho end
  return {ho[2] or false, ho[3] or false, ho[4] or false, ho[5] or false,
          redis.call('PTTL', pk)}, ho
end
-- once_mark(k): the --once-per mark PREFIX{NAME}:done (KEYS[11]) as its value (the fence
-- of the run that succeeded), '' for a key of another type (set by hand: an acquire with
-- --once-per skips on any key there, acquire.lua, so it is a mark, of no fence, that
-- --reset clears), or false when there is none.
local function once_mark(k)
  local v = redis.pcall('GET', k)
  if type(v) == 'string' then return v end
  local e = type(v) == 'table' and v.err
  return type(e) == 'string' and string.find(e, 'WRONGTYPE', 1, true) and '' or false
end
