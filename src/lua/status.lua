-- SPDX-License-Identifier: MIT
-- Status: who holds the lock, for how long, and the fence; changes nothing.
-- KEYS: lock owner fence
local o = redis.call('HMGET', KEYS[2], 'host', 'pid', 'user', 'cmd', 'start', 'ttl', 'fence',
                    'kept')
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]),
        o[1], o[2], o[3], o[4], o[5], o[6], o[7] or redis.call('GET', KEYS[3]), o[8]}
