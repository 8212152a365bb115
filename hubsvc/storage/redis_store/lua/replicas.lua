-- The live hub replicas (hubsvc/storage/redis_liveness.py). KEYS[1] = the directory set of replica
-- ids; ARGV[1] = the prefix of their liveness keys. Returns {id, address, id, address, ...} for each
-- replica whose liveness key has not lapsed, and removes the others from the directory (a replica
-- adds itself again with each beat, so one that beats after this removal is listed again).
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local address = redis.call('GET', ARGV[1] .. id)
  if address then
    out[#out + 1] = id
    out[#out + 1] = address
  else
    redis.call('SREM', KEYS[1], id)
  end
end
return out
