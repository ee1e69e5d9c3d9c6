-- SPDX-License-Identifier: MIT
-- Included (by the build, at a '--@history' line) by the scripts that write a name's
-- history: PREFIX{NAME}:history, a stream of the runs (acquired, and how each ended)
-- and the supersessions, newest last, capped at len entries (exactly below 100, else
-- MAXLEN ~: whole nodes of 100), PEXPIRE ret_ms on every write, so an idle name's
-- stream goes after its retention. len and ret_ms are the holder's (given by its
-- acquire, kept with its open run); len 0 (or none): nothing is written.
-- The history is best effort: a user whose ACL lacks +xadd/+xrevrange (or a key of
-- another type) loses the record, never the lock (redis.pcall; --check says so).
-- The open runs, so that each run gets exactly one end record, written by whoever ends
-- it first, and an acquire reads one small key (not the stream): PREFIX{NAME}:history:run
-- holds the open exclusive run (run_pack) or 'shared' while shared holders or permits
-- have open runs, each in PREFIX{NAME}:history:runs (a sorted set of run_pack strings,
-- scored by their token's first 12 hex digits to be found again; commands the
-- documented ACL has); both PEXPIRE ret_ms when written, deleted when the last run ends. An end is recorded only
-- for a run still open there: released, broken, preempted (the run's holder, or the
-- operator, ends it), expired (the next acquire or a prune finds its lease over: nobody
-- saw it end), lost (its holder lived to see its lease gone, before anyone else).
-- history_add(lock, len, ret_ms, field, value, ...): true when the entry was written.
local function history_add(lock, len, ret, ...)
  len = tonumber(len or '0') or 0
  if len <= 0 then return false end
  local k, r = lock .. ':history', nil
  if len < 100 then
    r = redis.pcall('XADD', k, 'MAXLEN', len, '*', ...)
  else
    r = redis.pcall('XADD', k, 'MAXLEN', '~', len, '*', ...)
  end
  ret = tonumber(ret or '0') or 0
  if ret > 0 then redis.pcall('PEXPIRE', k, ret) end
  return type(r) == 'string'
end
-- A run as one string: its fields, each ended by a NUL (none of them holds one: they
-- come from C strings); run_of reads it back (nil: not a run, e.g. 'shared').
-- handed: "s" and the command's status, once the holder's release handed the lock to a
-- --preempt request's reservation and left the run open for that request's grant to end
-- (release.lua); a reservation that ended untaken leaves it to the next acquire, which
-- records it released with that status, as the holder's rlock would (not expired: the
-- holder did not die).
local RUN_FIELDS = {'fence', 'token', 'host', 'pid', 'user', 'label', 'len', 'ret', 'handed'}
local function run_pack(fence, token, host, pid, user, label, len, ret, handed)
  local t = {fence, token, host or '', pid or '', user or '', label or '', len or '0', ret or '0'}
  if handed then t[#t + 1] = handed end
  t[#t + 1] = ''
  return table.concat(t, '\0')
end
local function run_of(v)
  if type(v) ~= 'string' or not string.find(v, '\0', 1, true) then return nil end
  local r, i = {}, 1
  for x in string.gmatch(v, '([^%z]*)%z') do
    if RUN_FIELDS[i] then r[RUN_FIELDS[i]] = x end
    i = i + 1
  end
  return r
end
-- history_end(lock, run, ev, field, value, ...): the end record of an open run.
local function history_end(lock, r, ev, ...)
  return history_add(lock, r.len, r.ret, 'ev', ev, 'fence', r.fence, 'token', r.token, 'host',
                     r.host, 'pid', r.pid, 'label', r.label, ...)
end
-- history_set(k, v, ret): SET k v (PX ret_ms when there is one), the old value back.
local function history_set(k, v, ret)
  ret = tonumber(ret or '0') or 0
  if ret > 0 then return redis.pcall('SET', k, v, 'PX', ret, 'GET') end
  return redis.pcall('SET', k, v, 'GET')
end
-- The open runs of shared holders and permits: sem_find(lock, token) -> run, member.
local function sem_score(token) return tonumber(string.sub(token, 1, 12), 16) or 0 end
local function sem_find(lock, token)
  local s = sem_score(token)
  local ms = redis.pcall('ZRANGEBYSCORE', lock .. ':history:runs', s, s)
  if type(ms) ~= 'table' or ms.err then return nil end
  for _, m in ipairs(ms) do
    local r = run_of(m)
    if r and r.token == token then return r, m end
  end
  return nil
end
-- sem_drop(lock, member): one open run out; 'shared' goes with the last one.
-- (Counted before: a key emptied here is not touched again, here.lua.)
local function sem_drop(lock, m)
  local n = redis.pcall('ZCARD', lock .. ':history:runs')
  local gone = redis.pcall('ZREM', lock .. ':history:runs', m)
  if type(n) == 'number' and n - (type(gone) == 'number' and gone or 0) == 0 and
     redis.pcall('GET', lock .. ':history:run') == 'shared' then
    redis.pcall('DEL', lock .. ':history:run')
  end
end
-- history_sem_expired(lock, tokens): the shared holders' or permits' open runs whose
-- lease is over end as expired (tokens nil: every one left).
local function history_sem_expired(lock, tokens)
  if not tokens then
    local all = redis.pcall('ZRANGE', lock .. ':history:runs', 0, -1)
    if type(all) ~= 'table' or all.err then return end
    for _, m in ipairs(all) do
      local r = run_of(m)
      if r then history_end(lock, r, 'expired') end
      sem_drop(lock, m)
    end
    return
  end
  for _, tok in ipairs(tokens) do
    local r, m = sem_find(lock, tok)
    if r then
      sem_drop(lock, m)
      history_end(lock, r, 'expired')
    end
  end
end
-- history_acquired(lock, kind, fence, token, host, pid, user, label, len, ret): a run
-- opens (kind 'x': the exclusive one, else a shared holder's or a permit's); the open
-- run it finds in its place (a lease that ran out unreleased) ends as expired.
local function history_acquired(lock, kind, fence, token, host, pid, user, label, len, ret)
  if (tonumber(len or '0') or 0) <= 0 then return end
  local run = run_pack(fence, token, host, pid, user, label, len, ret)
  local old = history_set(lock .. ':history:run', kind == 'x' and run or 'shared', ret)
  if old == 'shared' and kind == 'x' then history_sem_expired(lock, nil) end
  local r = run_of(old)
  if r and r.token == token then
    -- its own run, still open, taken again (a Redlock node that lost the key): no new run
    history_set(lock .. ':history:run', old, ret)
    return
  end
  if r and r.handed and r.handed ~= '' then
    history_end(lock, r, 'released', 'status', string.sub(r.handed, 2))
  elseif r then
    history_end(lock, r, 'expired')
  end
  if kind ~= 'x' then
    local runs = lock .. ':history:runs'
    redis.pcall('ZADD', runs, sem_score(token), run)
    if (tonumber(ret or '0') or 0) > 0 then redis.pcall('PEXPIRE', runs, ret) end
  end
  history_add(lock, len, ret, 'ev', 'acquired', 'fence', fence, 'token', token, 'host',
              host or '', 'pid', pid or '', 'user', user or '', 'label', label or '')
end
-- history_unacquired(lock, token): a grant given back unused (an attempt: no quorum, or
-- a reply too late, wait.c give_back) was no run: its acquired record goes, and no end
-- is written; an expired record of it that the next acquisition wrote meanwhile (the
-- reply came after the lease) goes with it. Written a moment ago, but other holders
-- (-s, --limit) may have written many since, while the reply was late: the newest
-- acquired of its token among the last 1000. Any other end of it (a --break) stays.
-- The bound keeps the step short (a history may be set to 1000000 entries), and it is no
-- correctness problem: only the token's own entries go, and only for a grant its rlock
-- already knows was no run (the caller decides that, never this scan), so no real run is
-- ever judged unacquired and no other run's record is touched. A miss (none of the
-- token's entries among the last 1000) needs a stream that holds more: a history longer
-- than about 900 (MAXLEN ~ keeps up to len + 99 entries; the default 100 never does)
-- and more than 1000 entries written between the grant and its give-back (some 500
-- runs of other holders while one reply was late). Then its acquired record stays,
-- with no end: --history shows an acquired that was no run (its open run is gone, so
-- no expired is made up for it) until the stream's cap trims it. History, best effort.
local function history_unacquired(lock, token)
  local es = redis.pcall('XREVRANGE', lock .. ':history', '+', '-', 'COUNT', 1000)
  local ids = {}
  for _, e in ipairs(type(es) == 'table' and not es.err and es or {}) do
    local f, ev, tok = e[2], nil, nil
    for i = 1, #f - 1, 2 do
      if f[i] == 'ev' then ev = f[i + 1] elseif f[i] == 'token' then tok = f[i + 1] end
    end
    if tok == token and ev == 'expired' then
      ids[#ids + 1] = e[1]
    elseif tok == token and ev == 'acquired' then
      redis.pcall('XDEL', lock .. ':history', e[1], unpack(ids))
      return
    elseif tok == token then
      return
    end
  end
end
-- history_taken(lock, token, arg): was the lock of token's run, found gone at its release
-- (neither the lock nor its holder's record there, as after an expiry), taken away
-- (deleted by hand, evicted, flushed) before its lease could end? arg, the release's
-- ARGV[11]: "taken", a renewal found the token no longer holding, before the lease's end
-- by the holder's clock (it renews no later); else the lease's end by the holder's clock
-- in ms after the acquire was sent: the token's acquired record (its stream ID: the
-- server's time of the acquire, no sooner than it was sent) younger than that by the
-- server's clock, the release ran before the lease's end by the holder's clock, and the
-- server set each expiry no sooner than the holder counts it: the key cannot have
-- expired by itself. (A reply of 0 that reaches rlock before the lease's end, its exit
-- 79, is always such a case.) Unknown (no number, the record not among the last 1000
-- entries): false, expired as before. Read only on that path, never on a plain release.
local function history_taken(lock, token, arg)
  if arg == 'taken' then return true end
  local lease = tonumber(arg or '')
  if not lease or lease <= 0 then return false end
  local es = redis.pcall('XREVRANGE', lock .. ':history', '+', '-', 'COUNT', 1000)
  for _, e in ipairs(type(es) == 'table' and not es.err and es or {}) do
    local f, ev, tok = e[2], nil, nil
    for i = 1, #f - 1, 2 do
      if f[i] == 'ev' then ev = f[i + 1] elseif f[i] == 'token' then tok = f[i + 1] end
    end
    if tok == token and ev == 'acquired' then
      local t = redis.call('TIME')
      local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      return now - (tonumber(string.match(e[1], '^(%d+)')) or now) < lease
    end
  end
  return false
end
-- history_close(lock, token): the open run of token, taken out of the open runs (its
-- end is the caller's to write), or nil when it is not open (ended already).
local function history_close(lock, token)
  local k = lock .. ':history:run'
  local run = redis.pcall('GET', k)
  local r = run_of(run)
  if r and r.token == token then
    redis.pcall('DEL', k)
    return r
  end
  if run ~= 'shared' then return nil end
  local m
  r, m = sem_find(lock, token)
  if r then sem_drop(lock, m) end
  return r
end
-- released_before(lock, token): did a release of token end its run already (a release
-- sent again after its reply was lost)? Its first answer (1 released, 2 kept for
-- --min-hold, 3 handed to the --preempt request that stopped it: release.lua), or false: PREFIX{NAME}:rel:<token>
-- (released_mark; "2" is always written for a keep, whose end record says released as a
-- hand-on's does: the caller answers 4 then, the keep over), or its end record in the
-- history (released: 1, preempted: 3), newer
-- than its acquired record, among the last 1000 entries (history_keeps: above
-- 1000, the mark answers).
local function released_before(lock, token)
  local mark = redis.pcall('GET', lock .. ':rel:' .. token) -- here.lua
  if mark == '3' then return 3 elseif mark == '2' then return 2 end
  if type(mark) == 'string' then return 1 end
  local es = redis.pcall('XREVRANGE', lock .. ':history', '+', '-', 'COUNT', 1000)
  if type(es) ~= 'table' or es.err then return false end
  for _, e in ipairs(es) do
    local f, ev, tok = e[2], nil, nil
    for i = 1, #f - 1, 2 do
      if f[i] == 'ev' then ev = f[i + 1] elseif f[i] == 'token' then tok = f[i + 1] end
    end
    if tok == token and ev == 'released' then return 1 end
    if tok == token and ev == 'preempted' then return 3 end
    if tok == token and ev == 'acquired' then return false end
  end
  return false
end
-- stamp_again(key, ...): a release sent again that finds its first call's effect writes
-- nothing else; a WAIT (--wait-replicas) or WAITAOF (--wait-aof) after it counts only
-- its connection's writes, and Redis 7.2 and Valkey stamp a connection's offset on a
-- write alone: on its fresh connection WAIT answered at once with every replica still
-- linked, a stopped one too, for a release that had reached none. The first key given
-- that has an expiry gets it again (a write that changes nothing), so the first call's
-- effects lie before this connection's offset in the replication stream.
local function stamp_again(...)
  for _, k in ipairs({...}) do
    local left = redis.pcall('PTTL', k)
    if type(left) == 'number' and left > 0 then
      redis.pcall('PEXPIRE', k, left)
      return
    end
  end
end
-- history_keeps(len): a record written now outlives the next few (history = len) and a
-- release sent again finds it: the cap trims whole nodes of 100 from the oldest end
-- (MAXLEN ~) from 100 on; below, it is exact, and the next record (a waiter's acquired,
-- woken by the release) may trim it (history = 1) before a release sent again looks for
-- it: then the mark is written too. Above 1000 the mark is written as well: released_before
-- reads the last 1000 entries only (a bounded step), and other holders (-s, -l N) may
-- write more than that between the release and its retry; the mark answers exactly. The
-- default history (100) writes no mark: a plain release makes no call more.
local function history_keeps(len)
  len = tonumber(len or '0') or 0
  return len >= 100 and len <= 1000
end
-- released_mark(lock, token, recorded, left_ms[, answer]): unless the release's end record
-- was written (recorded), the mark a release sent again finds (PREFIX{NAME}:rel:<token>,
-- the release's answer, "1", "2" or "3": the history off, or refused by the ACL), for what was
-- left of the lease (its holder sends no release after that), a second at least.
local function released_mark(lock, token, recorded, left, answer)
  if recorded then return end
  left = tonumber(left) or 0
  redis.call('SET', lock .. ':rel:' .. token, tostring(answer or 1), 'PX',
             left > 1000 and math.floor(left) or 1000)
end
