-- SPDX-License-Identifier: MIT
-- Included (by the build, at a '--@wake_one' line) where a plain exclusive lock can
-- become free. A plain waiter's place is in PREFIX{NAME}:waiters, scored with the end
-- of its lease (the server's ms); it blocks on its own list, wake_prefix .. token.
-- Wake one: pop the place that ends first and push to its list; places whose lease
-- ended (a waiter that died) are dropped on the way. The woken waiter tries; if it
-- loses (a newcomer got in first), its busy attempt takes a place again, so the next
-- release wakes a waiter again: no wake-up is lost while a live waiter has a place.
-- redis.pcall: a user whose ACL predates this (no ZPOPMIN, RPUSH) must not have its
-- release fail; its waiters are refused BLPOP too and listen on the release channel.
-- now: the server's ms, or nil: read (TIME) only when there is a place to judge.
local function wake_one(lock, prefix, now, why)
  for _ = 1, 16 do
    local w = redis.pcall('ZPOPMIN', lock .. ':waiters')
    if type(w) ~= 'table' or w.err or not w[1] then return end
    if not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    local left = tonumber(w[2]) - now
    if left > 0 then
      redis.pcall('RPUSH', prefix .. w[1], why)
      redis.pcall('PEXPIRE', prefix .. w[1], math.floor(left))
      return
    end
  end
end
