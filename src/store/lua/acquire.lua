-- SPDX-License-Identifier: MIT
-- Acquire: set the lock only if it is free, with a TTL, in one step; count the
-- acquisition in the fence and record who holds it. When busy, say who holds it
-- and for how long, so a waiter knows when the lease can run out; a waiting request
-- (wait = 1) takes a place among the waiters, so a release wakes one, not all.
-- KEYS: lock owner fence holders meta queue writer waiters [done] (lock.c: keys_of)
-- ARGV: token ttl_ms wait field value ... (wait: 0; 1, or p on this token's first attempt:
-- take a place among the waiters when busy)
-- Reply: {1, fence (a string)}, or busy: {0 or 2 (2: placed among the waiters), pttl, holder...},
-- or done: {3, pttl of the mark}, or closed by a lock-delay: {4, ms left} (delay.lua; the
-- holder's field delay, ms, asks for one), or superseded (--supersede): {5, host, pid, label}.
-- --once-per (KEYS[9] given): a run that succeeded inside the window left the mark
-- PREFIX{NAME}:done (release.lua): this request is done already, whether the lock is
-- free or busy; checked in this same step, so no run can slip between check and take.
-- Shared holders, permits or a fair queue: wait, and mark this exclusive request as
-- waiting, so that new shared holders queue behind it (writer preference).
-- The lock under our own token: an earlier attempt of this request took it and its
-- reply was lost (a timeout; the connection was dropped). It is ours: granted again,
-- its lease renewed from now, rather than waited for until it expires, with the fence
-- recorded in its owner's record (counted once: the history's and RLOCK_FENCE agree).
-- The fence is a string from start to end (counter.lua); a counter that cannot count
-- (not an integer, at the maximum) refuses every request at once, before any write.
--@counter
--@history
--@delay
-- Deploy queues (--supersede, --preempt) pass '@' pairs after the owner's fields
-- (lock.c): read here, never stored. The owner's fields may carry hist and hret, the
-- history's length and retention (history.lua).
local q, fields = {}, {}
for i = 4, #ARGV - 1, 2 do
  if string.sub(ARGV[i], 1, 1) == '@' then
    q[ARGV[i]] = ARGV[i + 1]
  else
    fields[#fields + 1] = ARGV[i]
    fields[#fields + 1] = ARGV[i + 1]
    q[ARGV[i]] = ARGV[i + 1]
  end
end
-- --prefix '': a key of the user's of the name's shape is neither waited for as a
-- holder nor written (foreign.lua); a byte compare under any other prefix.
if string.byte(KEYS[1], 1) == 123 then
--@foreign
end
local held = redis.call('GET', KEYS[1])
local mine = held == ARGV[1]
-- A free lock: one look at every key that could stand in the way (shared holders or
-- permits, the fair queue, the writer mark, --preempt's request, a lock-delay) or be
-- left over (an owner's record that outlived its lock by a few ms); none (the usual
-- case): none of the steps below that read, clear or overwrite them has anything to do.
local others = 1
if not mine and not held then
  others = redis.call('EXISTS', KEYS[4], KEYS[6], KEYS[7], KEYS[1] .. ':preempt',
                      KEYS[1] .. ':delay', KEYS[2])
end
-- Such a request (no --once-per, no --supersede) writes first the count itself, which
-- refuses what fence_check does (fence_take); any other checks the counter first.
local fast = others == 0 and not KEYS[9] and not q['@supersede']
if not fast then
  local why = fence_check(KEYS[3])
  if why then return redis.error_reply(why) end
  -- A typed read of the waiters' list, which every busy answer may write (a place, a
  -- replaced --supersede request's): one of another type (set by hand) fails the step
  -- here (WRONGTYPE, --reset deletes it: break.lua), before a :supersede record, a
  -- --preempt request or a writer mark is written and left behind.
  redis.call('ZSCORE', KEYS[8], ARGV[1])
end
-- Replaced by a newer --supersede request (PREFIX{NAME}:superseded:<token>, below):
-- final on every path, a free lock too (the newer one may have run and released).
-- The name's newest --supersede request (PREFIX{NAME}:supersede:last, written as one
-- takes the place or the lock, with the server's time, kept as long as the history,
-- '@sret'): another one there replaced this request when this one took the place before
-- ('2'), or was written after this request's first attempt was sent ('@sage' ms before
-- this one: a first attempt whose reply never came may have taken the place), also when
-- this one was away past its place's lease and the newer one, finding no place, ran.
-- Read by every --supersede request before any write (a Cluster slot that migrates).
if q['@supersede'] and not mine then
  local lk = KEYS[1] .. ':supersede:last'
  local by = redis.call('HMGET', KEYS[1] .. ':superseded:' .. ARGV[1], 'host', 'pid', 'label')
  if by[1] then return {5, by[1], by[2] or false, by[3] or false} end
  by = redis.call('HMGET', lk, 'token', 'host', 'pid', 'label', 'at')
  local age = tonumber(q['@sage'] or '0') or 0
  local newer = by[1] and by[1] ~= ARGV[1] and q['@supersede'] == '2'
  if by[1] and by[1] ~= ARGV[1] and not newer and age > 0 then
    local t = redis.call('TIME')
    newer = (tonumber(by[5] or '0') or 0) > tonumber(t[1]) * 1000 +
                                               math.floor(tonumber(t[2]) / 1000) - age
  end
  if newer then
    -- said once, as a replacement that found the place says it (supersede, below): the
    -- history's record, and the mark that answers this request's next attempts
    local mk = KEYS[1] .. ':superseded:' .. ARGV[1]
    redis.call('HSET', mk, 'host', by[2] or '', 'pid', by[3] or '', 'label', by[4] or '')
    redis.call('PEXPIRE', mk, math.max(3 * tonumber(ARGV[2]), 60000))
    history_add(KEYS[1], q.hist, q.hret, 'ev', 'superseded', 'fence', '', 'token', ARGV[1],
                'host', q.host or '', 'pid', q.pid or '', 'label', q.label or '', 'by_host',
                by[2] or '', 'by_pid', by[3] or '', 'by_label', by[4] or '')
    return {5, by[2] or false, by[3] or false, by[4] or false}
  end
end
-- The place among the waiters: a lease of the ttl, renewed by every attempt (wake_one.lua).
local function place()
  if ARGV[3] ~= '1' and ARGV[3] ~= 'p' then return 0 end
  local t = redis.call('TIME')
  local ttl = tonumber(ARGV[2])
  redis.call('ZADD', KEYS[8], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ttl,
             ARGV[1])
  if redis.call('PTTL', KEYS[8]) < ttl then redis.call('PEXPIRE', KEYS[8], ttl) end
  return 2
end
-- --supersede: one such request waits, whatever holds the lock (an exclusive holder,
-- shared holders or permits, a lock-delay, a --preempt handover); a newer one takes its
-- place and wakes it (its list and its channel), so that it leaves at once: {5, host,
-- pid, label} of the newer one when it tries again ('2': it took the place before).
-- Called before every busy answer; a reply to return, or nil. fence: the holder's.
local function supersede(fence)
  if not q['@supersede'] or mine then return nil end
  local sk = KEYS[1] .. ':supersede'
  local cur = redis.call('HMGET', sk, 'token', 'host', 'pid', 'label')
  if q['@supersede'] == '2' and cur[1] and cur[1] ~= ARGV[1] then
    return {5, cur[2] or false, cur[3] or false, cur[4] or false}
  end
  if cur[1] and cur[1] ~= ARGV[1] then
    -- who replaced it, kept for the replaced request's next attempt on any path
    local mk = KEYS[1] .. ':superseded:' .. cur[1]
    redis.call('HSET', mk, 'host', q.host or '', 'pid', q.pid or '', 'label', q.label or '')
    redis.call('PEXPIRE', mk, math.max(3 * tonumber(ARGV[2]), 60000))
    local wk = KEYS[1] .. ':wake:' .. cur[1]
    redis.call('ZREM', KEYS[8], cur[1])
    -- its --preempt request goes with it (as leave.lua's), in this step: it never runs,
    -- so no holder is stopped for it, nor the name kept for it
    local pk, call = KEYS[1] .. ':preempt', redis.call
    if call('HGET', pk, 'token') == cur[1] then
      --@preempt_drop
    end
    redis.pcall('RPUSH', wk, 'superseded') -- a wake-up: best effort (here.lua)
    redis.pcall('PEXPIRE', wk, ARGV[2])
    redis.pcall('PUBLISH', wk, 'superseded')
    history_add(KEYS[1], q.hist, q.hret, 'ev', 'superseded', 'fence', fence or '',
                'token', cur[1], 'host', cur[2] or '', 'pid', cur[3] or '',
                'label', cur[4] or '', 'by_host', q.host or '', 'by_pid', q.pid or '',
                'by_label', q.label or '')
  end
  if cur[1] ~= ARGV[1] then
    -- the name's newest request (above), written as it takes the place (no closure made
    -- for it: the plain acquire would pay for it; the grant below writes the same)
    local lk, t = KEYS[1] .. ':supersede:last', redis.call('TIME')
    redis.call('HSET', lk, 'token', ARGV[1], 'host', q.host or '', 'pid', q.pid or '', 'label',
               q.label or '', 'at', t[1] .. string.sub(string.format('%06d', t[2]), 1, 3))
    redis.call('PEXPIRE', lk, math.max(tonumber(q['@sret'] or '0') or 0, 3 * tonumber(ARGV[2]),
                                       60000))
    redis.call('DEL', sk)
    redis.call('HSET', sk, 'token', ARGV[1], 'host', q.host or '', 'pid', q.pid or '',
               'label', q.label or '')
  end
  redis.call('PEXPIRE', sk, ARGV[2])
  return nil
end
-- --preempt: a request's mark lives PREEMPT_MS (its ttl when shorter), renewed by each
-- of its attempts (a --preempt waiter tries at least three times as often): a requester
-- that is gone stops no holder. A preempted holder's release keeps the lock for that
-- request (handover = 1, release.lua) for as long, renewed the same way: nobody else
-- takes it meanwhile (acquire_sem.lua too), and that request takes it before any other
-- waiter (the fair queue too); only live shared holders or permits, or a lock-delay, make
-- it wait, its reservation kept.
local PREEMPT_MS = math.min(tonumber(ARGV[2]), 5000)
local pk = KEYS[1] .. ':preempt'
local ho = {}
if not mine and others > 0 then
  ho = redis.call('HMGET', pk, 'handover', 'token', 'host', 'pid', 'label')
  if ho[1] ~= '1' then ho = {} end
end
local handed = ho[1] and ho[2] == ARGV[1]
if handed then redis.call('PEXPIRE', pk, PREEMPT_MS) end
-- --preempt: a holder that agreed (--preemptible) learns it from its renewal.
local function ask_preempt()
  if q['@preempt'] and held and redis.call('HGET', KEYS[2], 'preemptible') == '1' then
    redis.call('HSET', pk, 'token', ARGV[1], 'host', q.host or '', 'pid', q.pid or '',
               'label', q.label or '')
    redis.call('PEXPIRE', pk, PREEMPT_MS)
  end
end
if KEYS[9] and not mine then
  local left = redis.call('PTTL', KEYS[9])
  if left ~= -2 then
    -- done: it leaves; its reservation goes with its leave (leave.lua), which wakes
    -- the waiters that may go then, as a release does
    return {3, left}
  end
end
-- A fair queue binds while a waiter that lives has a place in it: the places whose
-- lease ended (PREFIX{NAME}:qlease, acquire_sem.lua; a waiter that died) go first, as
-- acquire_sem.lua drops them, or one SIGKILLed --fair waiter kept the name from every
-- plain request until the queue's keys expired (its ttl), the lock free meanwhile.
-- :qlease and :qmeta are not declared (here.lua): read and cleared with redis.pcall.
local function queue_live()
  -- ZCARD, not EXISTS: a key of another type fails here, before the writer mark (as above)
  if others == 0 or redis.call('ZCARD', KEYS[6]) == 0 then return false end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local ql = KEYS[1] .. ':qlease'
  local dead = redis.pcall('ZRANGEBYSCORE', ql, '-inf', now, 'LIMIT', 0, 500)
  if type(dead) == 'table' and not dead.err and #dead > 0 then
    redis.call('ZREM', KEYS[6], unpack(dead))
    redis.pcall('ZREM', ql, unpack(dead))
    redis.pcall('HDEL', KEYS[1] .. ':qmeta', unpack(dead))
  end
  -- a place without its lease (:qlease lost alone) is no place (acquire_sem.lua)
  local nl = redis.pcall('ZCARD', ql)
  if type(nl) == 'number' and nl < redis.call('ZCARD', KEYS[6]) then
    local bare = {}
    for _, w in ipairs(redis.call('ZRANGE', KEYS[6], 0, 499)) do
      if redis.pcall('ZSCORE', ql, w) == false then bare[#bare + 1] = w end
    end
    if #bare > 0 then
      redis.call('ZREM', KEYS[6], unpack(bare))
      redis.pcall('HDEL', KEYS[1] .. ':qmeta', unpack(bare))
    end
  end
  return redis.call('ZCARD', KEYS[6]) > 0
end
-- --preempt against a --preemptible holder whose command has exited, its release keeping
-- the lock for --min-hold (kept): nothing to stop; the keep gives way to the request as
-- a release that found the request there hands it over (release.lua), before any other
-- waiter (the fair queue's too): taken at once. That run's end record is its release's
-- (released): none here. Only --preempt, only against --preemptible: a plain request
-- (-n too) waits the keep out.
local cut = false
if q['@preempt'] and held and not mine then
  local k = redis.call('HMGET', KEYS[2], 'kept', 'preemptible')
  cut = k[1] == '1' and k[2] == '1'
  if cut then held = false end
end
local queued = not cut and not mine and queue_live()
if q['@supersede'] and queued then
  return redis.error_reply('RLOCKMODE the lock has --fair waiters, this request asks for ' ..
                           '--supersede')
end
-- ZCARD, not EXISTS: a key of another type there (set by hand) fails the step before
-- its first write (the writer mark), loudly (WRONGTYPE: --reset deletes it, break.lua).
if not mine and others > 0 and (redis.call('ZCARD', KEYS[4]) > 0 or
                                 not handed and queued) then
  -- the first holder's record, read before any write (a :meta of another type fails here)
  local first = redis.call('ZRANGE', KEYS[4], 0, 0)[1]
  local ok, m = pcall(cjson.decode, first and redis.call('HGET', KEYS[5], first) or '{}')
  if not ok or type(m) ~= 'table' then m = {} end
  ask_preempt() -- an exclusive holder with --fair waiters behind it
  -- The writer mark: a short lease of its own (WRITER_MS, lock.h's LOCK_QUEUE_LEASE_MS,
  -- or the ttl when shorter), renewed by every attempt of the waiter (wait.c tries at
  -- least three times per lease): a writer that died keeps readers out seconds, not
  -- its ttl.
  local WRITER_MS = math.min(tonumber(ARGV[2]), 5000)
  redis.call('SET', KEYS[7], ARGV[1], 'PX', WRITER_MS)
  redis.call('ZREM', KEYS[8], ARGV[1]) -- woken by their release channel, not by a place
  local by = supersede(m.fence)
  if by then return by end
  if not first then
    -- nobody holds it: only the fair queue keeps this request out (its head not in yet,
    -- or a head that is away while its place's lease lasts): {.., 'queued', waiters}
    return {0, -1, false, false, false, false, false, false, false, false, false, false,
            'queued', redis.call('ZCARD', KEYS[6])}
  end
  -- Their keys live as long as the last lease in them (release_sem.lua): without a
  -- release, the name is free to this request when they expire (a holder that died, a
  -- --min-hold keep): the waiter wakes then, not a backoff later. The holder said is the
  -- one whose lease ends last (kept or not), their mode tells the waiter that it keeps a
  -- writer mark alive meanwhile (wait.c).
  local last = redis.call('ZRANGE', KEYS[4], -1, -1)[1]
  if last ~= first then
    ok, m = pcall(cjson.decode, redis.call('HGET', KEYS[5], last) or '{}')
    if not ok or type(m) ~= 'table' then m = {} end
  end
  return {0, redis.call('PTTL', KEYS[4]), m.host or false, m.pid or false, m.user or false,
          m.cmd or false, m.start or false, m.ttl or false, m.fence or false,
          m.label or false, m.kept or false, false, m.limit == 'shared' and m.limit or 'limit'}
end
if not mine and held then
  local o = redis.call('HMGET', KEYS[2], 'host', 'pid', 'user', 'cmd', 'start', 'ttl', 'fence',
                      'label', 'kept', 'preemptible')
  local by = supersede(o[7])
  if by then return by end
  ask_preempt()
  return {place(), redis.call('PTTL', KEYS[1]), o[1], o[2], o[3], o[4], o[5], o[6], o[7], o[8],
          o[9] or false, o[10] or false}
end
-- Free, but kept for the --preempt request that stopped its holder (release.lua).
-- A --supersede request replaces the one it is kept for (supersede): the reservation
-- goes with it, and this request goes on.
if ho[1] and not handed then
  local by = supersede(nil)
  if by then return by end
  if q['@supersede'] and redis.call('HGET', pk, 'handover') ~= '1' then ho = {} end
end
if ho[1] and not handed then
  return {place(), redis.call('PTTL', pk), ho[3] or false, ho[4] or false, false, false, false,
          false, false, ho[5] or false, false, false, 'reserved'}
end
-- --lock-delay: a lease that ended unreleased keeps the name closed (delay.lua): {4, ms left}.
local closed = not mine and not cut and others > 0 and delay_closed(KEYS[1], ARGV[1]) or 0
if closed > 0 then
  local by = supersede(nil)
  if by then return by end
  -- No place among the waiters: no release will come; the waiter sleeps until it opens.
  redis.call('ZREM', KEYS[8], ARGV[1])
  return {4, closed}
end
-- Redis does not roll a script back: count first, then the holder's record, the lock
-- itself last, so that a write refused (a user without one of these commands) leaves
-- no lock that nobody holds.
-- Ours already (a retry after a lost reply): the fence it was given, not a second count.
local fence, why
delay_ready(KEYS[1], q.delay) -- refused before the count, not after the lock (delay.lua)
-- --supersede, about to be granted: an older request still in the place (woken by the
-- release, not in yet) is replaced by this newer one, as on a busy answer, so that it
-- never runs after it (its place, below, goes with the grant); this one replaced first
-- (its place taken by a newer one): {5}, before any write of the grant. (Not fast: the
-- counter was checked above.)
if q['@supersede'] and not mine and redis.call('EXISTS', KEYS[1] .. ':supersede') == 1 then
  local by = supersede(nil)
  if by then return by end
end
if mine then
  fence = redis.call('HGET', KEYS[2], 'fence')
elseif fast then
  fence, why = fence_take(KEYS[3])
  if not fence then return redis.error_reply(why) end
else
  fence = fence_next(KEYS[3])
end
-- A waiting request: its place goes, and so does a wake-up left in its list (a standby's
-- and a release's both, wake_one.lua), undeclared (redis.pcall: here.lua). Its first
-- attempt ('p') has neither: only an attempt of this token can have made them.
if ARGV[3] == '1' then
  redis.call('ZREM', KEYS[8], ARGV[1])
  redis.pcall('DEL', KEYS[1] .. ':wake:' .. ARGV[1])
end
-- A new run of a token whose earlier grant was given back (its reply came too late, a
-- Redlock round without a quorum): that release's mark (release.lua) answered for the
-- earlier run; a release of this one must not find it. Not on a first attempt ('p').
if not mine and ARGV[3] ~= 'p' then redis.pcall('DEL', KEYS[1] .. ':rel:' .. ARGV[1]) end
if others > 0 and redis.call('GET', KEYS[7]) == ARGV[1] then redis.call('DEL', KEYS[7]) end
-- An earlier holder's record, unless the look above found none; ours: rewritten as is
-- (here.lua).
if not mine and others > 0 then redis.call('DEL', KEYS[2]) end
-- The last confirmed renewal (server ms, a string): renew.lua moves it on.
local tr = redis.call('TIME')
redis.call('HSET', KEYS[2], 'fence', fence, 'renewed',
           tr[1] .. string.sub(string.format('%06d', tr[2]), 1, 3), unpack(fields))
redis.call('PEXPIRE', KEYS[2], ARGV[2])
if q['@supersede'] and not mine then
  local lk = KEYS[1] .. ':supersede:last' -- the name's newest request, as supersede writes it
  redis.call('HSET', lk, 'token', ARGV[1], 'host', q.host or '', 'pid', q.pid or '', 'label',
             q.label or '', 'at', tr[1] .. string.sub(string.format('%06d', tr[2]), 1, 3))
  redis.call('PEXPIRE', lk, math.max(tonumber(q['@sret'] or '0') or 0, 3 * tonumber(ARGV[2]),
                                     60000))
  if redis.call('HGET', KEYS[1] .. ':supersede', 'token') == ARGV[1] then
    redis.call('DEL', KEYS[1] .. ':supersede')
  end
end
if not mine then
  -- the preempted holder's run (left open by its release) ends preempted, by this request
  local from = handed and redis.call('HMGET', pk, 'from', 'fstatus')
  local r = from and from[1] and history_close(KEYS[1], from[1])
  if r then
    history_end(KEYS[1], r, 'preempted', 'status', from[2] or '', 'by_host', q.host or '',
                'by_pid', q.pid or '', 'by_label', q.label or '')
  end
  -- the request (ask_preempt) goes; the word that one took its hand-over stays
  if others > 0 then
    local call = redis.call
    --@preempt_drop
  end
  -- the request a preempted holder's release handed the lock to took it: said to that
  -- holder's rlock (status.lua), which exits 81 only then
  if handed then
    redis.call('HSET', pk, 'taken', ARGV[1], 'thost', q.host or '', 'tpid', q.pid or '',
               'tlabel', q.label or '')
    redis.call('PEXPIRE', pk, PREEMPT_MS)
  end
  history_acquired(KEYS[1], 'x', fence, ARGV[1], q.host, q.pid, q.user, q.label, q.hist, q.hret)
end
if mine then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
delay_hold(KEYS[1], ARGV[1], ARGV[2], q.delay) -- the holder's field, as stored above
return {1, fence}
