-- SPDX-License-Identifier: MIT
-- Included (by the build, at a '--@wake_one' line) where a plain exclusive lock can
-- become free. A plain waiter's place is in PREFIX{NAME}:waiters, scored with the end
-- of its lease (the server's ms); it blocks on its own list, wake_prefix .. token.
-- Wake one: pop the place that ends first and push to its list; places whose lease
-- ended (a waiter that died) are dropped on the way, and so are places whose list still
-- holds a wake-up: that waiter has not listened since (it died, or it is trying and will
-- find the wake-up when it listens again). The woken waiter tries; if it loses (a
-- newcomer got in first), its busy attempt takes a place again, so the next release
-- wakes a waiter again: no wake-up is lost while a live waiter has a place.
-- A live lease does not make a live waiter: one that died (kill -9, or it gave up while
-- the server was frozen and its last attempt ran after it had gone) keeps its place
-- until the lease ends, and the wake-up would go to nobody. So one more waiter stands by:
-- the place last renewed (the waiter seen alive most recently: dead places stop being
-- renewed and sink to the front) is pushed 'standby', keeping its place; it tries at once,
-- takes the lock if the woken one did not, else its busy attempt renews its place.
-- redis.pcall: a user whose ACL predates this (no ZPOPMIN, RPUSH) must not have its
-- release fail; its waiters are refused BLPOP too and listen on the release channel.
-- now: the server's ms, or nil: read (TIME) only when there is a place to judge.
local function wake_one(lock, prefix, now, why)
  local z = lock .. ':waiters'
  local function waiting(tok, score)
    return tonumber(score) > now and redis.pcall('EXISTS', prefix .. tok) ~= 1
  end
  local function push(tok, score, what)
    redis.pcall('RPUSH', prefix .. tok, what)
    redis.pcall('PEXPIRE', prefix .. tok, math.floor(tonumber(score) - now))
  end
  local woken
  for _ = 1, 16 do
    local w = redis.pcall('ZPOPMIN', z)
    if type(w) ~= 'table' or w.err or not w[1] then return end
    if not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    if waiting(w[1], w[2]) then
      push(w[1], w[2], why)
      woken = w[1]
      break
    end
  end
  if not woken then return end
  -- the last three (ZRANGE: the documented ACL has no ZREVRANGE), the last renewed first
  local f = redis.pcall('ZRANGE', z, -3, -1, 'WITHSCORES')
  if type(f) ~= 'table' or f.err then return end
  for i = #f - 1, 1, -2 do
    if waiting(f[i], f[i + 1]) then
      push(f[i], f[i + 1], 'standby')
      return
    end
  end
end
