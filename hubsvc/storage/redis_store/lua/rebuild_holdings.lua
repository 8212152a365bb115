#!lua
-- Fill the holder sets of a store written before them (hubsvc/storage/redis_store/upkeep.py).
-- KEYS[1] the mark, KEYS[2] channels:live, KEYS[3] tasks:live, then holder sets; ARGV[1] '1' to set
-- the mark; then triples (which live set: 2 or 3, holder set index, member): add each still live
for i = 2, #ARGV, 3 do
  if redis.call('SISMEMBER', KEYS[tonumber(ARGV[i])], ARGV[i + 2]) == 1 then
    redis.call('SADD', KEYS[tonumber(ARGV[i + 1])], ARGV[i + 2])
  end
end
if ARGV[1] == '1' then redis.call('SET', KEYS[1], '1') end
return 1
