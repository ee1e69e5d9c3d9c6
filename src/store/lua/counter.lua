-- SPDX-License-Identifier: MIT
-- Included (by the build, at a '--@counter' line) where a fence is counted or merged. A
-- fence is a signed 64-bit integer, never a Lua number (a double: exact only up to 2^53,
-- and INCR's reply is one): it stays the string Redis stores, checked and compared by
-- sign, length and digits, byte by byte (Lua's < on strings follows the locale).
local function digits_less(a, b) -- a < b, both digits only, of equal length
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return false
end
-- int64(s): s is an integer as INCR reads one: "0" or -?[1-9][0-9]*, in the signed
-- 64-bit range.
local function int64(s)
  local neg, d = string.match(s, '^(%-?)([1-9]%d*)$')
  if not d then return s == '0' end
  if #d ~= 19 then return #d < 19 end
  return not digits_less(neg == '' and '9223372036854775807' or '9223372036854775808', d)
end
-- int64_less(a, b): a < b, both int64(...).
local function int64_less(a, b)
  local na, nb = string.sub(a, 1, 1) == '-', string.sub(b, 1, 1) == '-'
  if na ~= nb then return na end
  if na then a, b = string.sub(b, 2), string.sub(a, 2) end -- the larger magnitude is less
  if #a ~= #b then return #a < #b end
  return digits_less(a, b)
end
-- fence_check(key): nil if the counter at key can count one more (absent, or an integer
-- below the maximum), else the error reply's text (code RLOCKFENCE). Only reads: a
-- script calls it before its first write, so a refusal changes nothing (Redis does not
-- roll a script back).
local function fence_check(key)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' then
    return 'RLOCKFENCE cannot read the fence counter ' .. key .. ': ' .. tostring(v.err)
  end
  if v and not int64(v) then
    return 'RLOCKFENCE the fence counter ' .. key .. ' does not hold a 64-bit integer'
  end
  if v == '9223372036854775807' then
    return 'RLOCKFENCE the fence counter ' .. key .. ' is at the largest 64-bit integer: ' ..
           'no higher fence exists'
  end
  return nil
end
-- fence_of(key, v): INCR's reply v as the string Redis stores at key: a Lua number is
-- exact (and printed with %d as Redis prints it) below 2^53 in magnitude; beyond, read
-- back.
local function fence_of(key, v)
  if v < 9007199254740992 and v > -9007199254740992 then return string.format('%d', v) end
  return redis.call('GET', key)
end
-- fence_next(key): count one acquisition (after fence_check): the counter's new value.
local function fence_next(key)
  return fence_of(key, redis.call('INCR', key))
end
-- fence_take(key): fence_next for a request whose first write is this count, with no
-- fence_check before it: INCR refuses what fence_check does (another type, not an
-- integer, the maximum) and writes nothing when it does; the refusal is then named as
-- fence_check names it: nil and the error's text. Refused for another reason (an ACL,
-- a replica, OOM), INCR is called again and raises it as fence_next would.
local function fence_take(key)
  local v = redis.pcall('INCR', key)
  if type(v) == 'table' then
    local why = fence_check(key)
    if why then return nil, why end
    v = redis.call('INCR', key)
  end
  return fence_of(key, v)
end
