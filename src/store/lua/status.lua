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
-- handover 1: every other acquire waits while it lives, acquire.lua), or false; or, for a
-- few seconds after that request took the lock, {token, host, pid, label, pttl, 'taken'}
-- (acquire.lua): the preempted holder's rlock exits 81 only then.
-- PREFIX{NAME}:qmeta, :broken and :preempt (same hash tag) are not declared, as
-- release.lua's extra keys are not.
-- A slot left MIGRATING/IMPORTING (a resharding that stopped half-way): Redis refuses
-- the declared keys (TRYAGAIN) unless all of them are on the node. rlock then sends this
-- script again with ARGV[1] = PREFIX{NAME} and no key (to the node the slot migrates
-- from), or one key never created, PREFIX{NAME}:here (which that node sends, ASK, to the
-- node the slot migrates to): the keys are read one command each, a key this node does
-- not have ("non local", on the node the slot migrates from) as absent, and the reply
-- gains one field: how many of the keys read here exist on this node. rlock shows the
-- node that has them, and says so when both have some (routed.c).
local KEYS, redis, here_n = KEYS, redis, nil
if ARGV[1] then
  local base, R, keys = ARGV[1], redis, {}
  for i, sfx in ipairs({'', ':owner', ':fence', ':holders', ':meta', ':limit', ':queue',
                        ':qlease', ':writer', ':waiters', ':done'}) do
    keys[i] = base .. sfx
  end
  KEYS = keys
  local absent = {GET = false, HGET = false, ZSCORE = false, PTTL = -2, EXISTS = 0, ZCOUNT = 0}
  local function read(raise, cmd, ...)
    local r = R.pcall(cmd, ...)
    if type(r) == 'table' and type(r.err) == 'string' then
      if not string.find(r.err, 'non local key', 1, true) then
        if raise then return R.call(cmd, ...) end
        return r
      end
      local e = absent[string.upper(cmd)]
      if e == nil then return {} end
      return e
    end
    return r
  end
  local function call(...) return read(true, ...) end
  redis = setmetatable({call = call, pcall = function(...) return read(false, ...) end},
                       {__index = R})
  here_n = 0
  for _, k in ipairs({KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8],
                      KEYS[9], KEYS[10], KEYS[11], base .. ':qmeta', base .. ':broken',
                      base .. ':preempt', base .. ':delay'}) do
    here_n = here_n + call('EXISTS', k)
  end
end
-- --prefix '': a key of the user's of the name's shape is not shown as rlock's (foreign.lua):
-- the step refuses, as every acquire of the name does.
if string.byte(KEYS[1], 1) == 123 then
--@foreign
end
--@holders
--@delay
local done = once_mark(KEYS[11])
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
local reserved, ho = reservation(KEYS[1])
-- A key of another type there (set by hand) refuses every acquire (acquire.lua reads it
-- with redis.call): the status fails on it too, as on the name's other keys, never free.
local perr = type(ho) == 'table' and ho.err
if type(perr) == 'string' and string.find(perr, 'WRONGTYPE', 1, true) then
  redis.call('HMGET', KEYS[1] .. ':preempt', 'handover')
end
if not reserved then
  local pk = KEYS[1] .. ':preempt'
  local tk = redis.pcall('HMGET', pk, 'taken', 'thost', 'tpid', 'tlabel')
  if type(tk) == 'table' and tk[1] then
    reserved = {tk[1], tk[2] or false, tk[3] or false, tk[4] or false, redis.call('PTTL', pk),
                'taken'}
  end
end
return {fence, lim or false, n, hs, q,
        redis.call('ZCOUNT', KEYS[8], '(' .. now, '+inf'), redis.call('GET', KEYS[9]) or false,
        redis.call('ZCOUNT', KEYS[10], '(' .. now, '+inf'), done and redis.call('PTTL', KEYS[11]),
        done, closed > 0 and closed, broken_record(KEYS[1], now), false, 0, reserved, here_n}
