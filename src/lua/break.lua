-- SPDX-License-Identifier: MIT
-- Break (operator): remove whoever holds the lock, wake waiters, say what was removed.
-- KEYS: lock owner fence   ARGV: channel
local o = redis.call('HMGET', KEYS[2], 'host', 'pid', 'user', 'cmd', 'start', 'ttl', 'fence',
                    'kept')
local t = redis.call('GET', KEYS[1])
local p = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1], KEYS[2])
if t then redis.call('PUBLISH', ARGV[1], 'break') end
return {t, p, o[1], o[2], o[3], o[4], o[5], o[6], o[7] or redis.call('GET', KEYS[3]), o[8]}
