-- SPDX-License-Identifier: MIT
-- Break (operator): remove every holder (exclusive, shared, permits), wake the head of
-- the queue (or one plain waiter, and everyone on the release channel), say what was
-- removed. The queue stays, less the places whose lease ended (waiters that are gone).
-- Compare-and-break (if_token and/or if_fence given): only the holder with that token
-- (and fence) is removed, in this same step; when none holds it now (replaced, or
-- free), nothing changes and the reply says so (refused = 1), with the live --fair
-- places, a lock-delay's closed_ms and a --preempt reservation (status.lua's), which
-- keep the name from a new holder.
-- What was broken is recorded for an hour in PREFIX{NAME}:broken (host pid user at
-- tokens fence label): --status shows it, and so does the broken holder's loss message.
-- KEYS: lock owner fence holders meta limit queue qlease writer waiters
-- ARGV: channel publish wake_prefix host pid user if_token if_fence ('' : any) label
-- Reply: as status.lua's, with the holders removed (closed_ms false), and a 14th
-- element: the places of gone waiters dropped from the queue; a 16th: the strays deleted.
-- PREFIX{NAME}:qmeta and :broken are not declared, as release.lua's extra keys are not.
-- Reset (ARGV[10] = 'reset', KEYS[11] = done; the operator's history length and
-- retention in ARGV[11], ARGV[12]): no holder is removed (a live one stays --break's
-- business); the name's marks are cleared: the --lock-delay entries of holders whose
-- lease ended unreleased (PREFIX{NAME}:delay, not declared) and the --once-per mark.
-- The reply says what they were (done_pttl, done, closed_ms as status.lua's), the
-- history records the reset and who did it, and the waiters are woken. A --preempt
-- reservation stays (the 15th element names it, as status.lua's: --break removes it).
-- closed_ms (both): how long a lock-delay keeps the name closed after this step.
-- Strays (break, compare-and-break too, and reset, before anything reads a key): a key of the name's layout
-- that holds another type than rlock writes there (set by hand, another tool) makes every
-- script that reads it fail (WRONGTYPE: acquires exit 69, loud). It holds nothing of
-- rlock's, so the operator's tools delete it first, and the 16th element of the reply
-- names each one {suffix, type, ...}: also a compare-and-break's, refused or not (the
-- stray would fail it, 69, and every acquire after it). The --once-per mark is left out: any key there is a
-- mark (once_mark), which reset clears and break leaves. TYPE and DEL refused (an ACL): the
-- key stays, and the step fails on it as before.
-- --prefix '': the user's own keys of the name's shape are left as they are (foreign.lua).
if string.byte(KEYS[1], 1) == 123 then
--@foreign
end
local strays = {}
do
  for _, st in ipairs({{'', 'string'}, {':fence', 'string'}, {':owner', 'hash'},
                       {':holders', 'zset'}, {':meta', 'hash'}, {':limit', 'string'},
                       {':queue', 'zset'}, {':qlease', 'zset'}, {':qmeta', 'hash'},
                       {':writer', 'string'}, {':waiters', 'zset'}, {':delay', 'zset'},
                       {':preempt', 'hash'}, {':supersede', 'hash'},
                       {':supersede:last', 'hash'}, {':broken', 'hash'},
                       {':history', 'stream'}, {':history:run', 'string'},
                       {':history:runs', 'zset'}}) do
    local t = redis.pcall('TYPE', KEYS[1] .. st[1])
    t = type(t) == 'table' and t.ok
    if type(t) == 'string' and t ~= 'none' and t ~= st[2] and
       redis.pcall('DEL', KEYS[1] .. st[1]) == 1 then
      strays[#strays + 1] = st[1]
      strays[#strays + 1] = t
    end
  end
end
--@wake_one
--@holders
--@history
--@delay
local want_tok, want_fence = ARGV[7] or '', ARGV[8] or ''
local BROKEN_MS = 3600000
-- The one holder asked for, as {mode, token, fence}, or nil.
local function victim()
  local x = redis.call('GET', KEYS[1])
  if x then
    local f = redis.call('HGET', KEYS[2], 'fence')
    if (want_tok == '' or x == want_tok) and (want_fence == '' or f == want_fence) then
      return {'x', x}
    end
    return nil
  end
  local cand = want_tok ~= '' and {want_tok} or
               redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. now, '+inf', 'LIMIT', 0, 1000)
  for _, tok in ipairs(cand) do
    local s = tonumber(redis.call('ZSCORE', KEYS[4], tok) or 0)
    local ok, m = pcall(cjson.decode, redis.call('HGET', KEYS[5], tok) or '{}')
    if not ok or type(m) ~= 'table' then m = {} end
    if s > now and (want_fence == '' or tostring(m.fence) == want_fence) then
      return {lim == 'shared' and 's' or 'l', tok, s - now, m}
    end
  end
  return nil
end
-- The history (history.lua): the exclusive holder's run (token x) ended, broken by
-- ARGV[4..6] (the breaker's host, pid, user), only while its run is open: a lock kept
-- by --min-hold after its command exited has its end record (released) already, and
-- a run gets one (the :broken record still names who broke it, for --status).
local BY = {'by_host', ARGV[4] or '', 'by_pid', ARGV[5] or '', 'by_user', ARGV[6] or '',
            'by_label', ARGV[9] or ''}
local function history_broken(x)
  local run = redis.call('HMGET', KEYS[2], 'hist', 'hret', 'fence', 'host', 'pid', 'label')
  if not ((tonumber(run[1] or '0') or 0) > 0 and history_close(KEYS[1], x)) then return end
  history_add(KEYS[1], run[1], run[2], 'ev', 'broken', 'fence', run[3] or '', 'token', x,
              'host', run[4] or '', 'pid', run[5] or '', 'label', run[6] or '', unpack(BY))
end
-- Every shared holder's or permit's open run ends: broken while its lease lasts, else
-- expired (a dead holder not yet dropped).
local function history_sem_broken()
  local all = redis.pcall('ZRANGE', KEYS[1] .. ':history:runs', 0, -1)
  if type(all) ~= 'table' or all.err or #all == 0 then return end
  for _, m in ipairs(all) do
    local r = run_of(m)
    if r and tonumber(redis.call('ZSCORE', KEYS[4], r.token) or 0) > now then
      history_end(KEYS[1], r, 'broken', unpack(BY))
    elseif r then
      history_end(KEYS[1], r, 'expired')
    end
  end
  redis.pcall('DEL', KEYS[1] .. ':history:runs')
  if redis.pcall('GET', KEYS[1] .. ':history:run') == 'shared' then
    redis.pcall('DEL', KEYS[1] .. ':history:run')
  end
end
if ARGV[10] == 'reset' then
  local closed, d, x = delay_closed(KEYS[1]), KEYS[1] .. ':delay', redis.call('GET', KEYS[1])
  for _, dt in ipairs(redis.call('ZRANGE', d, 0, 999)) do
    local s = redis.call('ZSCORE', KEYS[4], dt)
    if dt ~= x and not (s and tonumber(s) > now) then redis.call('ZREM', d, dt) end
  end
  local done = once_mark(KEYS[11])
  local done_pttl = done and redis.call('PTTL', KEYS[11])
  if done then redis.call('DEL', KEYS[11]) end
  if closed > 0 or done then
    local what = {}
    if closed > 0 then what[#what + 1] = 'lock-delay' end
    if done then what[#what + 1] = 'once-per' end
    history_add(KEYS[1], ARGV[11], ARGV[12], 'ev', 'reset', 'fence', done or '', 'host',
                ARGV[4] or '', 'pid', ARGV[5] or '', 'user', ARGV[6] or '', 'label',
                ARGV[9] or '', 'cleared', table.concat(what, ' '), unpack(BY))
    wake_one(KEYS[1], ARGV[3], now, 'reset')
    redis.pcall(ARGV[2], ARGV[1], 'reset')
  end
  -- A --preempt reservation is no mark: it stays (--break's business, as a live holder);
  -- the reply's 15th element names it (status.lua's), so that the reset says so.
  local reserved = reservation(KEYS[1])
  return {fence, lim or false, n, hs, {}, 0, false, 0, done_pttl or false, done,
          closed > 0 and closed, broken_record(KEYS[1], now), false, 0, reserved, strays}
end
-- A plain break (no compare) removes the --preempt reservation too (nobody holds the
-- name, a preempted holder's release kept it for the request that stopped it, which may
-- be dead: PREFIX{NAME}:preempt with handover 1, release.lua): the preempted holder's
-- run, left open by its release, ends released with its command's status, and the
-- history records the break of the reservation (broken, cleared "reservation", the
-- request's token, host, pid, label, and who broke it). The reply's 15th element says
-- what was removed ({token, host, pid, label, pttl}, as status.lua's), else false.
local unreserved = false
if want_tok == '' and want_fence == '' and not tok then
  local ho
  unreserved, ho = reservation(KEYS[1], 'from', 'fstatus', 'hist', 'hret')
  if unreserved then
    local r = ho[6] and history_close(KEYS[1], ho[6])
    if r then history_end(KEYS[1], r, 'released', 'status', ho[7] or '') end
    history_add(KEYS[1], ho[8], ho[9], 'ev', 'broken', 'token', ho[2] or '', 'host',
                ho[3] or '', 'pid', ho[4] or '', 'label', ho[5] or '', 'cleared', 'reservation',
                unpack(BY))
    redis.call('DEL', KEYS[1] .. ':preempt')
  end
end
local tokens = {}
if want_tok ~= '' or want_fence ~= '' then
  local v = victim()
  if not v then -- what keeps the name from a new holder, for the refusal to say
    local closed = delay_closed(KEYS[1])
    return {fence, lim or false, n, hs, {}, redis.call('ZCOUNT', KEYS[8], '(' .. now, '+inf'),
            false, 0, false, false, closed > 0 and closed, broken_record(KEYS[1], now), 1, 0,
            (reservation(KEYS[1])), strays}
  end
  if v[1] == 'x' then
    hs = {unpack(hs, 1, 14)} -- holders.lua read the exclusive holder first
    history_broken(v[2])
    redis.call('DEL', KEYS[1], KEYS[2])
  else
    local m = v[4]
    hs = {}
    add(v[1], v[2], v[3], {m.host, m.pid, m.user, m.cmd, m.start, m.ttl, m.fence, m.kept,
        m.label, m.renewed, m.proc})
    local r = history_close(KEYS[1], v[2])
    if r then history_end(KEYS[1], r, 'broken', unpack(BY)) end
    redis.call('ZREM', KEYS[4], v[2])
    redis.call('HDEL', KEYS[5], v[2])
    if redis.call('ZCOUNT', KEYS[4], '(' .. now, '+inf') == 0 then
      redis.call('DEL', KEYS[4], KEYS[5], KEYS[6])
    end
  end
  n = 1
else
  if tok then history_broken(tok) end
  history_sem_broken()
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[4], KEYS[5], KEYS[6])
end
-- The places whose lease ended: their waiters are gone (acquire_sem.lua's QLEASE_MS).
local gone = redis.call('ZRANGEBYSCORE', KEYS[8], '-inf', now, 'LIMIT', 0, 500)
if #gone > 0 then
  redis.call('ZREM', KEYS[7], unpack(gone))
  redis.call('ZREM', KEYS[8], unpack(gone))
  redis.call('HDEL', KEYS[1] .. ':qmeta', unpack(gone))
end
if n > 0 then
  for i = 2, #hs, 14 do tokens[#tokens + 1] = hs[i] end
  local t = redis.call('TIME')
  local b = KEYS[1] .. ':broken'
  redis.call('DEL', b)
  redis.call('HSET', b, 'host', ARGV[4], 'pid', ARGV[5], 'user', ARGV[6], 'at',
             t[1] .. string.sub(string.format('%06d', t[2]), 1, 3), 'tokens',
             table.concat(tokens, ' '), 'fence', hs[10] or '')
  redis.call('HSET', b, 'label', ARGV[9] or '') -- the breaker's --label
  redis.call('PEXPIRE', b, BROKEN_MS)
  local head = redis.call('ZRANGE', KEYS[7], 0, 0)[1]
  if head then redis.pcall(ARGV[2], ARGV[3] .. head, 'break') end
  wake_one(KEYS[1], ARGV[3], now, 'break')
  redis.pcall(ARGV[2], ARGV[1], 'break')
elseif unreserved then
  local head = redis.call('ZRANGE', KEYS[7], 0, 0)[1]
  if head then redis.pcall(ARGV[2], ARGV[3] .. head, 'break') end
  wake_one(KEYS[1], ARGV[3], now, 'break')
  redis.pcall(ARGV[2], ARGV[1], 'break')
end
local closed = delay_closed(KEYS[1])
return {fence, lim or false, n, hs, {}, 0, false,
        redis.call('ZCOUNT', KEYS[10], '(' .. now, '+inf'), false, false, closed > 0 and closed,
        broken_record(KEYS[1], now), false, #gone, unreserved, strays}
