-- SPDX-License-Identifier: MIT
-- Status: every holder (the exclusive one, shared holders or permits, live by the
-- server's clock), the queue and the fence; changes nothing.
-- KEYS: lock owner fence holders meta limit queue qlease writer waiters done
-- Reply: {last_fence, limit, holders_total, {14 fields per holder}, {token, lease_left,
-- host, pid, waited_ms per waiter}, queue_total, writer, plain_waiters, done_pttl,
-- done_fence, closed_ms, broken, false, 0, reserved}; holder fields: mode token pttl host pid user
-- cmd start ttl fence kept label renewed_ago proc; done_pttl/done_fence: the --once-per mark
-- (false when there is none); closed_ms: how long a lock-delay keeps the name closed
-- (delay.lua; false when open); broken: the last --break's record (holders.lua), or
-- false; reserved: {token, host, pid, label, pttl} of the --preempt request that a
-- preempted holder's release handed the free lock to (PREFIX{NAME}:preempt with
-- handover 1: every other acquire waits while it lives, acquire.lua), or false.
-- PREFIX{NAME}:qmeta, :broken and :preempt (same hash tag) are not declared, as
-- release.lua's extra keys are not.
--@holders
--@delay
local done = redis.pcall('GET', KEYS[11])
if type(done) ~= 'string' then done = false end
local q = {}
local closed = delay_closed(KEYS[1])
local zq = redis.call('ZRANGE', KEYS[7], 0, 199, 'WITHSCORES')
for i = 1, #zq, 2 do
  local tok = zq[i]
  local e = tonumber(redis.call('ZSCORE', KEYS[8], tok) or 0)
  if e > now and #q < 32 * 5 then
    local ok, m = pcall(cjson.decode, redis.call('HGET', KEYS[1] .. ':qmeta', tok) or '{}')
    if not ok or type(m) ~= 'table' then m = {} end
    local row = {tok, e - now, m.host or false, m.pid or false,
                 now - math.floor(tonumber(zq[i + 1]) / 1000)}
    for j = 1, 5 do q[#q + 1] = row[j] end
  end
end
local pk = KEYS[1] .. ':preempt'
local ho = redis.pcall('HMGET', pk, 'handover', 'token', 'host', 'pid', 'label')
local reserved = false
if type(ho) == 'table' and ho[1] == '1' then
  reserved = {ho[2] or false, ho[3] or false, ho[4] or false, ho[5] or false,
              redis.call('PTTL', pk)}
end
return {fence, lim or false, n, hs, q,
        redis.call('ZCOUNT', KEYS[8], '(' .. now, '+inf'), redis.call('GET', KEYS[9]) or false,
        redis.call('ZCOUNT', KEYS[10], '(' .. now, '+inf'), done and redis.call('PTTL', KEYS[11]),
        done, closed > 0 and closed, broken_record(KEYS[1], now), false, 0, reserved}
