-- SPDX-License-Identifier: MIT
-- A waiter gives up (--wait expired, a signal): leave the queue and drop the writer
-- mark if it is ours; if we were the head, wake the next one in our place.
-- Shared requests held back by our writer mark are woken (release channel).
-- KEYS: queue qlease writer   ARGV: token publish wake_prefix channel
local head = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('GET', KEYS[3]) == ARGV[1] then
  redis.call('DEL', KEYS[3])
  redis.call(ARGV[2], ARGV[4], 'leave')
end
if head == ARGV[1] then
  local nxt = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
  if nxt then redis.call(ARGV[2], ARGV[3] .. nxt, 'next') end
end
return 1
