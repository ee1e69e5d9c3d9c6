-- SPDX-License-Identifier: MIT
-- Acquire in the modes beyond a plain exclusive lock: shared (-s), N permits (-l N),
-- and the fair queue (--fair; kind x is then the exclusive lock itself). Leases are
-- judged by the server's clock (TIME): a holder or waiter whose lease ended is dropped.
-- KEYS: lock owner fence holders meta limit queue qlease writer [done]
-- --once-per (KEYS[10] given, an exclusive lock only): {3, pttl of the mark} when a run
-- that succeeded inside the window left PREFIX{NAME}:done (as acquire.lua).
-- ARGV: token ttl_ms kind(x|shared|N) fair nowait publish wake_prefix host pid user cmd start
-- (nowait: 1 -n; 0 waits, 2 waits without a place among the waiters: no BLPOP there)
-- label [delay_ms [hist hret [proc]]] (proc: boot id and pid namespace, holder.c)
-- The history (history.lua, hist > 0): the run opens; the holders whose lease is over,
-- dropped here (or gone with their keys: no live holder left), end as expired.
-- Closed by a lock-delay (delay.lua): {4, ms left}, after taking a place in the queue.
-- The fence is a string from start to end (counter.lua); a counter that cannot count
-- (not an integer, at the maximum) refuses every request at once, before any write.
--@counter
--@delay
--@history
--@wake_one
-- --prefix '': a key of the user's of the name's shape is neither waited for nor
-- written (foreign.lua).
if string.byte(KEYS[1], 1) == 123 then
--@foreign
end
local why = fence_check(KEYS[3])
if why then return redis.error_reply(why) end
local tok, ttl, kind = ARGV[1], tonumber(ARGV[2]), ARGV[3]
-- Typed reads, not EXISTS: a key of another type (set by hand) there fails the step
-- loudly (WRONGTYPE, --reset deletes it: break.lua) instead of a false "busy" or mode.
if ARGV[4] == '1' and redis.call('HGET', KEYS[1] .. ':supersede', 'token') then
  return redis.error_reply('RLOCKMODE a --supersede request waits for the lock, this ' ..
                           'request asks for --fair')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function extend(k, ms)
  local p = redis.call('PTTL', k)
  if p == -1 or (p >= 0 and p < ms) then redis.call('PEXPIRE', k, ms) end
end
local function prune(z, cmd, other)
  local dead = redis.call('ZRANGEBYSCORE', z, '-inf', now, 'LIMIT', 0, 500)
  if #dead > 0 then
    redis.call('ZREM', z, unpack(dead))
    redis.call(cmd, other, unpack(dead))
  end
  return dead
end
local function meta(m)
  local ok, v = pcall(cjson.decode, m or '{}')
  if ok and type(v) == 'table' then return v end
  return {}
end
local hist = (tonumber(ARGV[15] or '0') or 0) > 0
local dead = prune(KEYS[4], 'HDEL', KEYS[5])
if #dead > 0 then history_sem_expired(KEYS[1], dead) end
-- A place in the queue is a short lease of its own (QLEASE_MS, lock.h's
-- LOCK_QUEUE_LEASE_MS, or the ttl when shorter): a waiter that died costs the next one
-- seconds, not its ttl; its host and pid (for --status) are in PREFIX{NAME}:qmeta.
local QLEASE_MS, qmeta = 5000, KEYS[1] .. ':qmeta'
local gone = prune(KEYS[8], 'ZREM', KEYS[7])
if #gone > 0 then redis.call('HDEL', qmeta, unpack(gone)) end
-- A place without its lease (:qlease evicted or deleted alone, the queue kept) is no
-- place: nothing would end it, and a dead waiter's kept the queue for the queue key's
-- ttl. One step writes both, so the counts differ only then; our own place stays.
if redis.call('ZCARD', KEYS[8]) < redis.call('ZCARD', KEYS[7]) then
  local bare = {}
  for _, w in ipairs(redis.call('ZRANGE', KEYS[7], 0, 499)) do
    if w ~= tok and not redis.call('ZSCORE', KEYS[8], w) then bare[#bare + 1] = w end
  end
  if #bare > 0 then
    redis.call('ZREM', KEYS[7], unpack(bare))
    redis.call('HDEL', qmeta, unpack(bare))
  end
end
local n = redis.call('ZCARD', KEYS[4])
if kind ~= 'x' and n > 0 then
  local lim = redis.call('GET', KEYS[6])
  -- The mode key lost alone (evicted, deleted): the holders' records say it (limit), or
  -- a request of another mode joined holders that count on theirs, none of them told.
  if not lim then
    local first = redis.call('ZRANGE', KEYS[4], 0, 0)[1]
    lim = first and meta(redis.call('HGET', KEYS[5], first)).limit
  end
  if lim and lim ~= kind then
    local function name(k) return k == 'shared' and '--shared' or '--limit ' .. k end
    return redis.error_reply('RLOCKMODE the lock is held with ' .. name(lim) ..
                             ', this request asks for ' .. name(kind))
  end
end
-- Held under our own token already (an earlier attempt of this request whose reply
-- was lost): granted again, its lease renewed, rather than waited for.
local mine = redis.call('GET', KEYS[1]) == tok or
             (kind ~= 'x' and redis.call('ZSCORE', KEYS[4], tok) ~= false)
if KEYS[10] and not mine then
  local left = redis.call('PTTL', KEYS[10])
  if left ~= -2 then return {3, left} end
end
local free
if mine then free = true
elseif redis.call('EXISTS', KEYS[1]) == 1 then free = false
elseif kind == 'x' then free = n == 0
elseif kind == 'shared' then free = true
else free = n < tonumber(kind) end
-- A queue binds everyone while it exists; without one, a waiting exclusive request
-- (the writer mark) keeps new shared holders out: writers are preferred.
local queued = ARGV[4] == '1' or redis.call('EXISTS', KEYS[7]) == 1
if queued then
  local head = redis.call('ZRANGE', KEYS[7], 0, 0)[1]
  if head and head ~= tok and not mine then free = false end
elseif kind ~= 'x' and not mine and redis.call('GET', KEYS[9]) then
  free = false
end
-- Kept for the --preempt request that stopped its holder (release.lua, acquire.lua):
-- it goes first, before the queue's head too; the busy reply names it.
local ho = {}
if free and not mine then
  ho = redis.call('HMGET', KEYS[1] .. ':preempt', 'handover', 'token', 'host', 'pid', 'label')
  if ho[1] == '1' and ho[2] ~= tok then free = false else ho = {} end
end
-- --lock-delay: a lease that ended unreleased keeps the name closed (delay.lua).
local closed = free and not mine and delay_closed(KEYS[1], tok) or 0
if closed > 0 then free = false end
-- A waiting permit request (-l N, no queue) takes a place among the waiters, as a plain
-- exclusive one does (acquire.lua): a release frees one permit and wakes one of them
-- (release_sem.lua), not every waiter of the name; the one that takes a permit passes
-- the wake-up on while permits are left. (Shared requests all fit at once: they listen
-- on the release channel.) Undeclared keys (here.lua): redis.pcall.
local permit = kind ~= 'x' and kind ~= 'shared'
local waiters = KEYS[1] .. ':waiters'
local placed = 0
if not free then
  -- What the busy answer says, read before the place is written: a key of another type
  -- (set by hand) there (:owner, :meta, :writer) fails the step before it, not after (a
  -- place left in the fair queue, binding it for QLEASE_MS).
  local held = redis.call('EXISTS', KEYS[1]) == 1
  local o = held and redis.call('HMGET', KEYS[2], 'host', 'pid', 'user', 'cmd', 'start',
                                'ttl', 'fence', 'label', 'kept', 'preemptible')
  -- the holder whose lease ends first frees a permit; an exclusive request (--fair)
  -- waits for the one whose lease ends last
  local pick = kind == 'x' and -1 or 0
  local first = not held and redis.call('ZRANGE', KEYS[4], pick, pick, 'WITHSCORES')
  local fm = first and first[1] and redis.call('HGET', KEYS[5], first[1])
  local wmark = first and not first[1] and kind ~= 'x' and redis.call('GET', KEYS[9])
  if permit and not queued and ARGV[5] == '0' then
    local z = redis.pcall('ZADD', waiters, now + ttl, tok)
    if type(z) == 'number' then
      placed = 2
      local p = redis.pcall('PTTL', waiters)
      if type(p) == 'number' and p < ttl then redis.pcall('PEXPIRE', waiters, ttl) end
    end
  elseif permit and queued then
    redis.pcall('ZREM', waiters, tok) -- the queue orders it now
  end
  if queued and ARGV[5] ~= '1' then
    if not redis.call('ZSCORE', KEYS[7], tok) then
      -- who waits first: a :qmeta of another type (set by hand) fails the step before the
      -- place is written (a place without its lease would bind the queue for its ttl)
      redis.call('HSET', qmeta, tok, cjson.encode({host = ARGV[8], pid = ARGV[9]}))
      redis.call('ZADD', KEYS[7], tonumber(t[1]) * 1000000 + tonumber(t[2]), tok)
    end
    redis.call('ZADD', KEYS[8], now + math.min(ttl, QLEASE_MS), tok)
    extend(KEYS[7], ttl)
    extend(KEYS[8], ttl)
    extend(qmeta, ttl)
  end
  if closed > 0 then return {4, closed} end
  if held then
    return {placed, redis.call('PTTL', KEYS[1]), o[1], o[2], o[3], o[4], o[5], o[6], o[7],
            o[8], o[9] or false, o[10] or false}
  end
  if not first[1] and ho[1] then -- nobody holds it: kept for that request (acquire.lua's)
    return {placed, redis.call('PTTL', KEYS[1] .. ':preempt'), ho[3] or false, ho[4] or false,
            false, false, false, false, false, ho[5] or false, false, false, 'reserved'}
  end
  -- nobody holds it: the fair queue's waiters ahead of this request go first (its rank
  -- by ZSCORE and ZCOUNT, ties in ZRANGE's order: the documented ACL has no ZRANK)
  local ahead = queued and redis.call('ZCARD', KEYS[7])
  local sc = queued and redis.call('ZSCORE', KEYS[7], tok)
  if sc then
    ahead = redis.call('ZCOUNT', KEYS[7], '-inf', '(' .. sc)
    for _, o in ipairs(redis.call('ZRANGEBYSCORE', KEYS[7], sc, sc)) do
      if o < tok then ahead = ahead + 1 end
    end
  end
  if not first[1] and ahead and ahead > 0 then
    return {placed, -1, false, false, false, false, false, false, false, false, false, false,
            'queued', ahead}
  end
  -- nobody holds it: a waiting exclusive request's mark keeps this one out (writers first)
  if not first[1] and wmark then
    return {placed, -1, false, false, false, false, false, false, false, false, false, false,
            'writer', 1}
  end
  if not first[1] then return {placed, -1, false, false, false, false, false, false, false} end
  local m = meta(fm)
  return {placed, tonumber(first[2]) - now, m.host or false, m.pid or false, m.user or false,
          m.cmd or false, m.start or false, m.ttl or false, m.fence or false, m.label or false,
          m.kept or false, false}
end
-- Count first: a write refused (a user without INCR) then leaves no holder behind.
-- Before it, a typed read of the keys a shared or limited grant writes that nothing
-- above read: one of another type (set by hand) fails the step here (WRONGTYPE, --reset
-- deletes it: break.lua), not after the holder's entry and its history were written.
if kind ~= 'x' then
  redis.call('HGET', KEYS[5], tok)
  redis.call('GET', KEYS[6])
end
delay_ready(KEYS[1], ARGV[14]) -- and --lock-delay's command before it (delay.lua)
-- Ours already (a retry after a lost reply): the fence it was given, counted once.
local f = mine and (kind == 'x' and redis.call('HGET', KEYS[2], 'fence') or
                    meta(redis.call('HGET', KEYS[5], tok)).fence) or fence_next(KEYS[3])
if queued then
  redis.call('ZREM', KEYS[7], tok)
  redis.call('ZREM', KEYS[8], tok)
  redis.call('HDEL', qmeta, tok)
end
-- A new run of a token whose earlier grant was given back: that release's mark
-- (release.lua, release_sem.lua) answered for the earlier run, not this one.
if not mine then redis.pcall('DEL', KEYS[1] .. ':rel:' .. tok) end
if hist and not mine then
  if kind ~= 'x' and n == 0 then history_sem_expired(KEYS[1], nil) end
  history_acquired(KEYS[1], kind, f, tok, ARGV[8], ARGV[9], ARGV[10], ARGV[13], ARGV[15],
                   ARGV[16])
end
if kind == 'x' then
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[2], 'fence', f, 'host', ARGV[8], 'pid', ARGV[9], 'user', ARGV[10],
             'cmd', ARGV[11], 'start', ARGV[12], 'ttl', ARGV[2], 'label', ARGV[13],
             'proc', ARGV[17] or '')
  -- hist and hret: the release (release.lua) writes the run's end with them
  redis.call('HSET', KEYS[2], 'renewed', t[1] .. string.sub(string.format('%06d', t[2]), 1, 3),
             'hist', ARGV[15] or '0', 'hret', ARGV[16] or '0')
  if (tonumber(ARGV[14] or '0') or 0) > 0 then redis.call('HSET', KEYS[2], 'delay', ARGV[14]) end
  redis.call('PEXPIRE', KEYS[2], ttl)
  redis.call('SET', KEYS[1], tok, 'PX', ttl) -- last, as in acquire.lua
  delay_hold(KEYS[1], tok, ttl, ARGV[14])
  return {1, f}
end
redis.call('ZADD', KEYS[4], now + ttl, tok)
-- delay: this holder has a --lock-delay entry (release_sem.lua touches its key first)
local delay = (tonumber(ARGV[14] or '0') or 0) > 0 and ARGV[14] or nil
redis.call('HSET', KEYS[5], tok, cjson.encode({host = ARGV[8], pid = ARGV[9], user = ARGV[10],
           cmd = ARGV[11], start = ARGV[12], ttl = ARGV[2], fence = f,
           label = ARGV[13], proc = ARGV[17], delay = delay, limit = kind,
           renewed = t[1] .. string.sub(string.format('%06d', t[2]), 1, 3)}))
redis.call('SET', KEYS[6], kind, 'KEEPTTL')
extend(KEYS[4], ttl)
extend(KEYS[5], ttl)
extend(KEYS[6], ttl)
delay_hold(KEYS[1], tok, ttl, ARGV[14])
-- Pass the wake-up on: the next in line may fit too (only it is woken, not everyone).
local nxt = queued and redis.call('ZRANGE', KEYS[7], 0, 0)[1]
if nxt and (kind == 'shared' or n + 1 < tonumber(kind)) then
  redis.pcall(ARGV[6], ARGV[7] .. nxt, 'next')
end
-- A permit taken by a waiting request: its place goes, and so does a wake-up left in its
-- list (pushed while it was trying: it found the permit on its own, or was woken and
-- its place popped), as acquire.lua does; the next waiter is woken while a permit is
-- left.
if permit and ARGV[5] == '0' then
  redis.pcall('ZREM', waiters, tok)
  redis.pcall('DEL', ARGV[7] .. tok)
end
if permit and not queued and n + 1 < tonumber(kind) then wake_one(KEYS[1], ARGV[7], now, 'next') end
return {1, f}
