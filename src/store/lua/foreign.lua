-- SPDX-License-Identifier: MIT
-- A step, included inline at a '--@foreign' line inside
-- `if string.byte(KEYS[1], 1) == 123 then ... end`: --prefix '' (no prefix), KEYS[1] is
-- {NAME} (a prefix never holds a brace), the shape of the user's own Cluster hash-tagged
-- keys ({user42}). There a name is rlock's only once its fence counter has counted an
-- acquisition (every acquire INCRs it, nothing deletes it); until then a key of the
-- name's layout that exists is the user's: the step refuses (RLOCKFOREIGN, naming the
-- first one) before anything reads it as rlock's or writes it. Under any other prefix
-- (the usual case) the step costs one byte compare.
local ff = redis.pcall('GET', KEYS[1] .. ':fence')
if not (type(ff) == 'string' and string.match(ff, '^%-?[1-9]%d*$')) then
  for _, sfx in ipairs({'', ':fence', ':owner', ':holders', ':meta', ':limit', ':queue',
                        ':qlease', ':qmeta', ':writer', ':waiters', ':delay', ':preempt',
                        ':supersede', ':supersede:last', ':broken', ':history',
                        ':history:run', ':history:runs', ':done'}) do
    local ft = redis.pcall('TYPE', KEYS[1] .. sfx)
    ft = type(ft) == 'table' and ft.ok
    if type(ft) == 'string' and ft ~= 'none' then
      return redis.error_reply('RLOCKFOREIGN ' .. KEYS[1] .. sfx .. ' holds a ' .. ft ..
                               ' that rlock did not write (no acquisition counted in ' ..
                               KEYS[1] .. ":fence; --prefix '' shares the keyspace): " ..
                               'left as it is')
    end
  end
end
