-- SPDX-License-Identifier: MIT
-- Release one shared holder or permit (or, keep_ms > 0, let it run keep_ms more for
-- --min-hold) and wake the head of the queue only; when there is none, one waiting
-- permit request (its place, wake_one.lua) and the release channel's listeners.
-- KEYS: holders meta limit (the queue, lock .. ':queue', only read: redis.pcall, here.lua)
-- ARGV: token keep_ms channel publish wake_prefix [done_ms status hist hret [lost [lease]]]
-- (lease: release.lua's)
-- (lost: "lost", rlock declared the lease lost by its own clock, exit 79: the permit,
-- still its own, is released, and the run ends lost; as release.lua, "seen" too; "attempt": a grant
-- given back unused, no run: its acquired record goes, no end)
-- A permit whose lease ran out by the server's clock (its score in the past, or its
-- entries gone with the keys' expiry, its record in meta too) while a
-- release sent within it by rlock's clock was on its way: the run ends expired, with
-- the command's status (it ended inside its lease by rlock's clock), not lost; so too
-- (lost: "expired", keep_ms -1) a release rlock could not send before that end.
-- The history (history.lua): the run ends released with the command's status; lost when
-- the lease is over (keep_ms -1: over by the holder's own clock, nothing is released);
-- the dead holders dropped here end as expired.
--@delay
--@history
--@here
--@wake_one
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tok, keep = ARGV[1], tonumber(ARGV[2])
-- The keys live as long as the longest lease in them, no longer.
local function expire_with_leases()
  local top = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2]
  if top and tonumber(top) > now then
    for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], tonumber(top) - now) end
  end
end
local lock = string.sub(KEYS[1], 1, -9) -- less ':holders'
local hist = (tonumber(ARGV[8] or '0') or 0) > 0
-- The token's open run ends (history.lua: an end only for a run still open; one that
-- ended already, e.g. recorded lost by a keeper that gave its lease up by its own clock
-- and left the permit to its job, gets no second end when its --release frees it).
local function history_ends(ev)
  local r = hist and history_close(lock, tok)
  if not r then return false end
  r.len, r.ret = ARGV[8], ARGV[9]
  return history_end(lock, r, ev, 'status', ARGV[7] or '')
end
local s = redis.call('ZSCORE', KEYS[1], tok)
-- Sent again after a lost reply: the answer of the first call (release.lua), kept for
-- --min-hold (kept in its record) or released (history.lua's released_before).
if keep >= 0 and s then
  local ok, m = pcall(cjson.decode, redis.call('HGET', KEYS[2], tok) or '{}')
  if ok and type(m) == 'table' and m.kept == '1' then
    stamp_again(KEYS[1], KEYS[2])
    return 2
  end
else
  local before = keep >= 0 and released_before(lock, tok) -- 2: kept, its keep over
  if before then
    stamp_again(lock .. ':rel:' .. tok, lock .. ':history')
    return before == 2 and 4 or before -- 4: kept, the keep over (release.lua)
  end
end
if not s or tonumber(s) <= now or keep < 0 then
  -- its --lock-delay entry goes when the release was sent within the lease by rlock's
  -- clock and rlock saw no loss (nor a --break): the lease ended with this release
  -- (release.lua, delay.lua)
  if keep >= 0 and ARGV[10] ~= 'lost' and ARGV[10] ~= 'seen' then delay_released(lock, tok) end
  -- its entry and record gone as an expiry leaves them, but sooner than the lease could
  -- end (ARGV[11], history.lua's history_taken): taken away, lost
  local late = ARGV[10] == 'expired' or ARGV[10] ~= 'lost' and keep >= 0 and
               (s or not redis.call('HGET', KEYS[2], tok) and
                not (hist and history_taken(lock, tok, ARGV[11])))
  if ARGV[10] ~= 'attempt' then
    history_ends(late and 'expired' or 'lost')
  elseif hist then
    -- a grant given back unused after its lease ran out (its reply came later than
    -- the lease): no run, no end (below); nor the end that the script that dropped its
    -- lease wrote, finding its run open (history.lua)
    history_close(lock, tok)
    history_unacquired(lock, tok)
  end
  return 0
end
-- The keys this step writes first (here.lua): a refusal does nothing. The mark of a
-- release without its end record (released_mark) is written too when the run has none
-- to write (the history off, or its run ended already).
-- So too when a short history may trim the end record before a release sent again looks
-- for it (history_keeps).
local open = hist and sem_find(lock, tok)
local keeps = open and ARGV[10] ~= 'lost' and history_keeps(ARGV[8]) -- release.lua's
-- A holder with a --lock-delay entry (its record says so: acquire_sem.lua) has that key
-- touched too: its entry must go with the release, or the release not happen.
local rec_ok, rec = pcall(cjson.decode, redis.call('HGET', KEYS[2], tok) or '{}')
local delayed = rec_ok and type(rec) == 'table' and rec.delay
here(delayed and lock .. ':delay', hist and lock .. ':history',
     hist and lock .. ':history:run', hist and lock .. ':history:runs',
     (keep > 0 or not keeps) and lock .. ':rel:' .. tok)
delay_open(lock, tok) -- no lock-delay after a release
local recorded
if ARGV[10] == 'attempt' then
  -- a grant given back unused (wait.c give_back): no run, as release.lua
  if hist and history_close(lock, tok) then history_unacquired(lock, tok) end
else
  recorded = history_ends(ARGV[10] == 'lost' and 'lost' or 'released')
end
if keep > 0 then
  -- sent again once the keep has ended (its first reply lost): the answer (release.lua)
  -- always: the end record says released, which a release sent again reads as 1
  released_mark(lock, tok, false, tonumber(s) - now, 2)
  redis.call('ZADD', KEYS[1], 'XX', now + keep, tok)
  local ok, m = pcall(cjson.decode, redis.call('HGET', KEYS[2], tok) or '{}')
  if ok and type(m) == 'table' then
    m.kept = '1'
    redis.call('HSET', KEYS[2], tok, cjson.encode(m))
  end
  expire_with_leases()
  return 2
end
released_mark(lock, tok, recorded and keeps, tonumber(s) - now)
-- Dead holders too, so that the last one out leaves no key behind. A key emptied here is
-- gone, and a node whose slot migrates refuses any command on it (here.lua): what is
-- left is counted before, and an emptied key is not touched again.
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 500)
local left = redis.call('ZCARD', KEYS[1]) - redis.call('ZREM', KEYS[1], tok, unpack(dead))
redis.call('HDEL', KEYS[2], tok, unpack(dead))
if #dead > 0 then history_sem_expired(lock, dead) end
if left == 0 then redis.call('DEL', KEYS[3]) else expire_with_leases() end
local head = redis.pcall('ZRANGE', lock .. ':queue', 0, 0)[1]
if head then
  redis.pcall(ARGV[4], ARGV[5] .. head, tok)
else
  -- One permit freed: one waiting permit request (a place, acquire_sem.lua); the
  -- channel for the others (shared and exclusive requests, and where no place is kept).
  wake_one(lock, ARGV[5], now, 'release')
  redis.pcall(ARGV[4], ARGV[3], tok)
end
return 1
