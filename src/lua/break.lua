-- SPDX-License-Identifier: MIT
-- Break (operator): remove every holder (exclusive, shared, permits), wake the head of
-- the queue (or one plain waiter, and everyone on the release channel), say what was
-- removed. The queue stays: its waiters are alive.
-- KEYS: lock owner fence holders meta limit queue qlease writer waiters
-- ARGV: channel publish wake_prefix
-- Reply: as status.lua's.
--@wake_one
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lim = redis.call('GET', KEYS[6])
local hs, n = {}, 0
local function add(mode, tok, pttl, o)
  local row = {mode, tok, pttl, o[1] or false, o[2] or false, o[3] or false, o[4] or false,
               o[5] or false, o[6] or false, o[7] or false, o[8] or false, o[9] or false}
  for i = 1, 12 do hs[#hs + 1] = row[i] end
end
local tok = redis.call('GET', KEYS[1])
if tok then
  n = 1
  add('x', tok, redis.call('PTTL', KEYS[1]), redis.call('HMGET', KEYS[2], 'host', 'pid', 'user',
      'cmd', 'start', 'ttl', 'fence', 'kept', 'label'))
end
n = n + redis.call('ZCOUNT', KEYS[4], '(' .. now, '+inf')
local live = redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 32)
for i = 1, #live, 2 do
  local ok, m = pcall(cjson.decode, redis.call('HGET', KEYS[5], live[i]) or '{}')
  if not ok or type(m) ~= 'table' then m = {} end
  add(lim == 'shared' and 's' or 'l', live[i], tonumber(live[i + 1]) - now,
      {m.host, m.pid, m.user, m.cmd, m.start, m.ttl, m.fence, m.kept, m.label})
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[4], KEYS[5], KEYS[6])
if n > 0 then
  local head = redis.call('ZRANGE', KEYS[7], 0, 0)[1]
  if head then redis.call(ARGV[2], ARGV[3] .. head, 'break') end
  wake_one(KEYS[1], ARGV[3], now, 'break')
  redis.call(ARGV[2], ARGV[1], 'break')
end
return {redis.call('GET', KEYS[3]) or 0, lim or false, n, hs, {}, 0, false,
        redis.call('ZCOUNT', KEYS[10], '(' .. now, '+inf')}
