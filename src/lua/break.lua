-- SPDX-License-Identifier: MIT
-- Break (operator): remove every holder (exclusive, shared, permits), wake the head of
-- the queue (or one plain waiter, and everyone on the release channel), say what was
-- removed. The queue stays: its waiters are alive.
-- KEYS: lock owner fence holders meta limit queue qlease writer waiters
-- ARGV: channel publish wake_prefix [host pid user: the breaker's]
-- Reply: as status.lua's.
--@wake_one
--@holders
--@history
-- The history (history.lua): the exclusive holder's run ended, broken by ARGV[4..6]
-- (the breaker's host, pid, user; given since the history).
local run = redis.call('HMGET', KEYS[2], 'hist', 'hret', 'fence', 'host', 'pid', 'label')
if tok then
  history_add(KEYS[1], run[1], run[2], 'ev', 'broken', 'fence', run[3] or '', 'token', tok,
              'host', run[4] or '', 'pid', run[5] or '', 'label', run[6] or '',
              'by_host', ARGV[4] or '', 'by_pid', ARGV[5] or '', 'by_user', ARGV[6] or '')
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[4], KEYS[5], KEYS[6])
if n > 0 then
  local head = redis.call('ZRANGE', KEYS[7], 0, 0)[1]
  if head then redis.call(ARGV[2], ARGV[3] .. head, 'break') end
  wake_one(KEYS[1], ARGV[3], now, 'break')
  redis.call(ARGV[2], ARGV[1], 'break')
end
return {fence, lim or false, n, hs, {}, 0, false,
        redis.call('ZCOUNT', KEYS[10], '(' .. now, '+inf')}
