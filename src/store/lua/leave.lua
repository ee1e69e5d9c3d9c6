-- SPDX-License-Identifier: MIT
-- A waiter gives up (--wait expired, a signal): leave the queue and drop the writer
-- mark if it is ours; if we were the head, wake the next one in our place.
-- Shared requests held back by our writer mark are woken (release channel). A plain
-- waiter leaves its place among the waiters; one that has no place any more may have
-- been woken (wake_one.lua) and gives up without trying: if the lock is free, the
-- wake-up goes to the next waiter.
-- KEYS: lock queue qlease writer (lock.c: keys_of)
--   ARGV: token publish wake_prefix channel
-- Reply: 1, or {5, host, pid, label} (as acquire.lua's) when a newer --supersede request
-- had replaced this one (its PREFIX{NAME}:superseded:<token> mark): a request that learns
-- it only as it gives up (its -w deadline) was superseded, not busy.
-- Its place among the waiters, its wake list, --supersede's place, --preempt's request
-- and its line in :qmeta are not declared: removed with redis.pcall (here.lua: not on
-- this node while the slot migrates, nothing to remove here).
--@wake_one
local placed = redis.pcall('ZREM', KEYS[1] .. ':waiters', ARGV[1])
redis.pcall('DEL', ARGV[3] .. ARGV[1])
if placed == 0 and redis.call('EXISTS', KEYS[1]) == 0 then
  local t = redis.call('TIME')
  wake_one(KEYS[1], ARGV[3], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), 'next')
end
-- --supersede's place and --preempt's request (acquire.lua) go with the waiter.
-- (--preempt's: the request's fields; the word that an earlier request took its
-- hand-over, acquire.lua's, stays for its preempted holder to read.)
if redis.pcall('HGET', KEYS[1] .. ':supersede', 'token') == ARGV[1] then
  redis.call('DEL', KEYS[1] .. ':supersede')
end
-- A name kept for this request (a preempted holder's release, release.lua) is free
-- once it goes: its end wakes every waiter that may now go, as a release does (the fair
-- queue's head, a plain waiter or permit, the release channel's shared requests and
-- Redlock waiters), and as --break's removal of it does (break.lua).
local pk, call = KEYS[1] .. ':preempt', redis.call
local pre = redis.pcall('HMGET', pk, 'token', 'handover')
local kept = false
if type(pre) == 'table' and not pre.err and pre[1] == ARGV[1] then
  kept = pre[2] == '1' and redis.call('EXISTS', KEYS[1]) == 0
  --@preempt_drop
end
local by = redis.pcall('HMGET', KEYS[1] .. ':superseded:' .. ARGV[1], 'host', 'pid', 'label')
if type(by) ~= 'table' or by.err or not by[1] then by = nil end
-- The head and the next one, read before: a queue emptied here is not touched again.
local two = redis.call('ZRANGE', KEYS[2], 0, 1)
local head = two[1]
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.pcall('HDEL', KEYS[1] .. ':qmeta', ARGV[1]) -- its host and pid (acquire_sem.lua)
if redis.call('GET', KEYS[4]) == ARGV[1] then
  redis.call('DEL', KEYS[4])
  redis.pcall(ARGV[2], ARGV[4], 'leave')
end
if head == ARGV[1] then
  local nxt = two[2]
  if nxt then redis.pcall(ARGV[2], ARGV[3] .. nxt, 'next') end
elseif kept and head then
  redis.pcall(ARGV[2], ARGV[3] .. head, 'next')
end
if kept then
  if placed ~= 0 then wake_one(KEYS[1], ARGV[3], nil, 'next') end -- not woken above
  redis.pcall(ARGV[2], ARGV[4], 'leave')
end
if by then return {5, by[1], by[2] or false, by[3] or false} end
return 1
