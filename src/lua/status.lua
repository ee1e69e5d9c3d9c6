-- SPDX-License-Identifier: MIT
-- Status: every holder (the exclusive one, shared holders or permits, live by the
-- server's clock), the queue and the fence; changes nothing.
-- KEYS: lock owner fence holders meta limit queue qlease writer waiters done
-- Reply: {last_fence, limit, holders_total, {12 fields per holder}, {token, lease_left
-- per waiter}, queue_total, writer, plain_waiters, done_pttl, done_fence, closed_ms}; holder fields:
-- mode token pttl host pid user cmd start ttl fence kept label; done_pttl/done_fence:
-- the --once-per mark (false when there is none); closed_ms: how long a lock-delay keeps
-- the name closed (delay.lua; false when open).
--@holders
--@delay
local done = redis.pcall('GET', KEYS[11])
if type(done) ~= 'string' then done = false end
local q = {}
local closed = delay_closed(KEYS[1])
for _, w in ipairs(redis.call('ZRANGE', KEYS[7], 0, 199)) do
  local e = tonumber(redis.call('ZSCORE', KEYS[8], w) or 0)
  if e > now and #q < 64 then
    q[#q + 1] = w
    q[#q + 1] = e - now
  end
end
return {fence, lim or false, n, hs, q,
        redis.call('ZCOUNT', KEYS[8], '(' .. now, '+inf'), redis.call('GET', KEYS[9]) or false,
        redis.call('ZCOUNT', KEYS[10], '(' .. now, '+inf'), done and redis.call('PTTL', KEYS[11]),
        done, closed > 0 and closed}
