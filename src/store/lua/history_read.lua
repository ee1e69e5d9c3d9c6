-- SPDX-License-Identifier: MIT
-- History (--history): the newest ARGV[1] entries of PREFIX{NAME}:history (history.lua),
-- newest first, each {id, field, value, ...}; changes nothing. A key of another type
-- (set by hand: no run of the name can be recorded, history.lua) is refused (WRONGTYPE),
-- never read as a name with no runs.
-- An open run (:history:run, :history:runs) whose lease is over here (its token holds
-- neither the lock nor a live place among the shared holders or permits, and no
-- --preempt reservation keeps it open: the holder died, or its end was lost with a
-- failover) comes first as the end the next acquisition will record, expired, marked
-- 'seen' 'read' (not recorded), at the server's time: no run reads as running forever.
-- Best effort (redis.pcall): a user whose ACL lacks the reads gets the stream alone.
-- KEYS: lock   ARGV: count   (under --prefix '', foreign.lua reads the name's other keys)
--@history
local k = KEYS[1] .. ':history'
local kt = redis.call('TYPE', k).ok
if kt == 'none' then return {} end
-- --prefix '': a key of the user's of the name's shape is not read (foreign.lua).
if string.byte(KEYS[1], 1) == 123 then
--@foreign
end
if kt ~= 'stream' then
  return redis.error_reply('WRONGTYPE ' .. k .. ' is a ' .. kt .. ', not the stream of ' ..
                           "rlock's history (a key set by hand?): no run of this name is " ..
                           'recorded')
end
local out = {}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function unended(r)
  -- handed to a --preempt reservation that ended untaken: released (history.lua)
  local handed = r.handed and r.handed ~= ''
  local row = {now .. '-0', 'ev', handed and 'released' or 'expired', 'fence', r.fence, 'token',
               r.token, 'host', r.host, 'pid', r.pid, 'user', r.user, 'label', r.label,
               'seen', 'read'}
  if handed then
    row[#row + 1] = 'status'
    row[#row + 1] = string.sub(r.handed, 2)
  end
  out[#out + 1] = row
end
-- a reply refused (an ACL, a key of another type) tells nothing: no run is ended by it
local function read(...)
  local v = redis.pcall(...)
  if type(v) == 'table' and v.err then return nil, true end
  return v, false
end
local open = read('GET', k .. ':run')
local r = run_of(open)
if r then
  local holder, e1 = read('GET', KEYS[1])
  -- kept open by a reservation only while it lives (handover 1: release.lua)
  local ho, e2 = read('HMGET', KEYS[1] .. ':preempt', 'handover', 'from')
  local from = not e2 and ho[1] == '1' and ho[2]
  if not e1 and not e2 and holder ~= r.token and from ~= r.token then unended(r) end
elseif open == 'shared' then
  local ms = read('ZRANGE', k .. ':runs', 0, 999)
  for _, m in ipairs(type(ms) == 'table' and ms or {}) do
    r = run_of(m)
    local till, e = read('ZSCORE', KEYS[1] .. ':holders', r and r.token or '')
    if r and not e and not ((tonumber(till) or 0) > now) then unended(r) end
  end
end
for _, e in ipairs(redis.call('XREVRANGE', k, '+', '-', 'COUNT', tonumber(ARGV[1]))) do
  local row = {e[1]}
  for i = 1, #e[2] do row[#row + 1] = e[2][i] end
  out[#out + 1] = row
end
return out
