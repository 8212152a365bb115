-- The live hub replicas (hubsvc/storage/redis_liveness.py). KEYS[1] = the directory set of replica
-- ids; ARGV[1] = the prefix of their liveness keys; ARGV[2] (with the channels divided) = the global
-- key prefix. Returns {id, address, id, address, ...} for each replica whose liveness key has not
-- lapsed, and removes the others from the directory and deletes their notice streams and counters
-- (a replica adds itself again with each beat, so one that beats after this removal is listed again;
-- that beat finds its key lapsed, and the replica reads its position afresh and refreshes everything).
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local address = redis.call('GET', ARGV[1] .. id)
  if address then
    out[#out + 1] = id
    out[#out + 1] = address
  else
    redis.call('SREM', KEYS[1], id)
    if ARGV[2] then redis.call('DEL', ARGV[2] .. 'notices:' .. id, ARGV[2] .. 'notices_seq:' .. id) end
  end
end
return out
