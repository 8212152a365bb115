-- A write or an append of one file, with its version, the path index and the change message, atomically.
-- KEYS: data, versions, index. ARGV: path, kind ("written"/"appended"), bytes, channel, ancestors...
-- Returns {offset, size, version}, or {-1, blocking file} / {-2, path} when the path is refused.
local path, kind, bytes = ARGV[1], ARGV[2], ARGV[3]
if redis.call('ZSCORE', KEYS[3], path) == false then
  for i = 5, #ARGV do
    if redis.call('ZSCORE', KEYS[3], ARGV[i]) ~= false then return {-1, ARGV[i]} end
  end
  if #redis.call('ZRANGEBYLEX', KEYS[3], '[' .. path .. '/', '(' .. path .. '0', 'LIMIT', 0, 1) > 0 then
    return {-2, path}
  end
  redis.call('ZADD', KEYS[3], 0, path)
end
local offset, size = 0, string.len(bytes)
if kind == 'written' then
  redis.call('SET', KEYS[1], bytes)
else
  size = redis.call('APPEND', KEYS[1], bytes)
  offset = size - string.len(bytes)
end
local version = redis.call('HINCRBY', KEYS[2], path, 1)
local change = {path = path, kind = kind, offset = offset, size = size, version = version}
redis.call('PUBLISH', ARGV[4], cjson.encode(change))
return {offset, size, version}
