-- SPDX-License-Identifier: MIT
-- Included (by the build, at a '--@delay' line) where --lock-delay is written or obeyed.
-- PREFIX{NAME}:delay (same hash tag; not declared, as release.lua's extra keys): a zset,
-- token -> the end of that holder's lease plus its lock-delay (server ms), written by the
-- acquire of a holder with a lock-delay and moved on by each of its renewals. A release
-- removes the entry (the name opens at once); a lease that ended without one (a crash, a
-- lost lease, --break) leaves it, and the name stays closed to everyone until its score.
-- The key expires with its largest score: nothing is left once every delay has ended.
local function delay_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- delay_closed(lock[, tok]): the ms the name PREFIX{NAME} = lock stays closed by the delay
-- of a holder whose lease ended unreleased (0: open). An entry of a live holder (the
-- exclusive token, a live shared holder or permit) closes nothing: it holds. Nor does
-- tok's own entry to tok (an acquire's token): the delay keeps a stalled holder from
-- racing the next one, not from its own lease; a Redlock holder that locks again a node
-- that lagged (its lease ran out there while a majority renewed it, quorum.c) would be
-- refused there by its own entry for the whole delay. Bounded: 64 entries, the ones that
-- end last first.
local function delay_closed(lock, tok)
  local d = lock .. ':delay'
  if redis.call('EXISTS', d) == 0 then return 0 end
  local now, x = delay_now(), redis.call('GET', lock)
  local es = redis.call('ZREVRANGEBYSCORE', d, '+inf', '(' .. now, 'WITHSCORES', 'LIMIT', 0, 64)
  for i = 1, #es, 2 do
    local s = redis.call('ZSCORE', lock .. ':holders', es[i])
    if es[i] ~= x and es[i] ~= tok and not (s and tonumber(s) > now) then
      return tonumber(es[i + 1]) - now
    end
  end
  return 0
end
-- delay_hold(lock, tok, ttl, delay): tok's lease runs ttl ms from now; with a delay
-- (ms > 0), the name stays closed that much longer if the lease ends unreleased.
local function delay_hold(lock, tok, ttl, delay)
  delay = tonumber(delay or '0')
  if not delay or delay <= 0 then return end
  local d, now = lock .. ':delay', delay_now()
  redis.call('ZREMRANGEBYSCORE', d, '-inf', now)
  redis.call('ZADD', d, now + tonumber(ttl) + delay, tok)
  local p = redis.call('PTTL', d)
  if p < tonumber(ttl) + delay then redis.call('PEXPIRE', d, tonumber(ttl) + delay) end
end
-- delay_ready(lock, delay): before a step's first write, with a delay (ms > 0): drops the
-- entries that ended (delay_hold's first command), so that a user refused it (an ACL from
-- before --lock-delay) or a node that refuses the key is refused before anything is
-- written, not after the grant or renewal (Redis keeps a script's writes before an error).
local function delay_ready(lock, delay)
  delay = tonumber(delay or '0')
  if not delay or delay <= 0 then return end
  redis.call('ZREMRANGEBYSCORE', lock .. ':delay', '-inf', delay_now())
end
-- delay_released(lock, tok): tok, which no longer holds here (its lease ran out on this
-- node: a Redlock node that lagged), released within its lease by rlock's clock with no
-- loss seen: its entry goes too, unless a --break removed tok (PREFIX{NAME}:broken names
-- it, break.lua: a broken holder's name stays closed, as documented).
local function delay_released(lock, tok)
  local b = redis.pcall('HGET', lock .. ':broken', 'tokens')
  if type(b) == 'string' and string.find(' ' .. b .. ' ', ' ' .. tok .. ' ', 1, true) then
    return
  end
  redis.pcall('ZREM', lock .. ':delay', tok)
end
-- delay_open(lock, tok): tok released: its delay ends now. A holder with a delay has its
-- key touched first (here.lua); without, a refusal means no entry here (redis.pcall).
local function delay_open(lock, tok)
  redis.pcall('ZREM', lock .. ':delay', tok)
end
