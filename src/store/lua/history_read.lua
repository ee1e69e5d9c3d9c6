-- SPDX-License-Identifier: MIT
-- History (--history): the newest ARGV[1] entries of PREFIX{NAME}:history (history.lua),
-- newest first, each {id, field, value, ...}; changes nothing. A key of another type
-- (set by hand) reads as none.
-- KEYS: lock   ARGV: count
local k = KEYS[1] .. ':history'
if redis.call('TYPE', k).ok ~= 'stream' then return {} end
local out = {}
for _, e in ipairs(redis.call('XREVRANGE', k, '+', '-', 'COUNT', tonumber(ARGV[1]))) do
  local row = {e[1]}
  for i = 1, #e[2] do row[#row + 1] = e[2][i] end
  out[#out + 1] = row
end
return out
