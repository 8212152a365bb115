-- The removal of one file, with its version, its index entry and the change message, atomically.
-- KEYS: data, versions, index. ARGV: path, channel. Returns 1, or 0 if there is no such file.
if redis.call('ZREM', KEYS[3], ARGV[1]) == 0 then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('PUBLISH', ARGV[2], cjson.encode({path = ARGV[1], kind = 'deleted', offset = 0, size = 0, version = 0}))
return 1
