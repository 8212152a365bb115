-- Purge one ended channel, once, whichever replica runs it (hubsvc/storage/redis_store/history.py).
-- KEYS: 1 meta, 2 members, 3 tombstones hash, 4 wal, 5 texts, 6 last, 7 idem, 8 replies, 9 live set,
--       then per member: its cursors hash, its member_channels zset.
-- ARGV: 1 channel id, 2 packed tombstone, 3 the record the sweep read (the channel must still hold it),
--       4 member count.
-- Returns 1 when this call purged the channel, 0 when it is live, changed, unknown or purged already.
local id = ARGV[1]
if redis.call('HGET', KEYS[1], 'live') ~= '0' then return 0 end
if redis.call('HEXISTS', KEYS[3], id) == 1 then return 0 end
if redis.call('HGET', KEYS[1], 'record') ~= ARGV[3] then return 0 end
redis.call('HSET', KEYS[3], id, ARGV[2])
-- UNLINK frees a large WAL stream off Redis's main thread.
redis.call('UNLINK', KEYS[1], KEYS[2], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
redis.call('SREM', KEYS[9], id)
local n = tonumber(ARGV[4])
for j = 1, n do
  redis.call('HDEL', KEYS[9 + 2 * j - 1], id)
  redis.call('ZREM', KEYS[9 + 2 * j], id)
end
return 1
