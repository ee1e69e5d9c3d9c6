-- SPDX-License-Identifier: MIT
-- Renew: extend the lease only while the token is still the holder.
-- KEYS: lock owner   ARGV: token ttl_ms [delay_ms: --lock-delay's entry moves on too]
--@delay
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
delay_hold(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
return 1
