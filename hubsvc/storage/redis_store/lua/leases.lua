#!lua
-- Partition leases (hubsvc/storage/redis_store/partitions.py runs it). KEYS[1] = the epochs hash
-- (partition -> the last epoch given, never reset); KEYS[2..] = lease keys, one per partition, each
-- '<replica id>\0<epoch>' with a time to live (PX), so a lease lapses by Redis's own clock.
-- ARGV[1] = op, ARGV[2] = deadline in microseconds of Redis's TIME (0 = none), ARGV[3] = this
-- replica's id, ARGV[4] = time to live in ms, ARGV[5..] = one value per lease key (see each op).
-- Returns {2, reason} (nothing done) when it runs after its deadline, else {1, ...} as each op says.
local op, me, ttl = ARGV[1], ARGV[3], ARGV[4]
local deadline = tonumber(ARGV[2])
if deadline > 0 then
  local now = redis.call('TIME')
  local late = tonumber(now[1]) * 1000000 + tonumber(now[2]) - deadline
  if late > 0 then return {2, 'the lease call reached Redis ' .. late .. ' us after its deadline'} end
end
local out, n = {1}, #KEYS - 1
local function split(value)
  local sep = string.find(value, '\0', 1, true)
  return string.sub(value, 1, sep - 1), string.sub(value, sep + 1)
end
if op == 'acquire' then
  -- ARGV[4 + j] = the partition of lease j. Free (or lapsed): a new epoch, taken ('g'); ours: renewed,
  -- same epoch ('k'); another's: left ('t'). Appends status, epoch, owner per lease.
  for j = 1, n do
    local key, cur = KEYS[j + 1], redis.call('GET', KEYS[j + 1])
    if not cur then
      local epoch = redis.call('HINCRBY', KEYS[1], ARGV[4 + j], 1)
      redis.call('SET', key, me .. '\0' .. epoch, 'PX', ttl)
      out[#out + 1] = 'g'; out[#out + 1] = tostring(epoch); out[#out + 1] = me
    else
      local owner, epoch = split(cur)
      if owner == me then
        redis.call('PEXPIRE', key, ttl)
        out[#out + 1] = 'k'
      else
        out[#out + 1] = 't'
      end
      out[#out + 1] = epoch; out[#out + 1] = owner
    end
  end
elseif op == 'renew' then
  -- ARGV[4 + j] = the epoch this replica holds lease j with. Appends the index j of each lease lost
  -- (lapsed, or held by another replica or epoch), which is left as it is.
  for j = 1, n do
    if redis.call('GET', KEYS[j + 1]) == me .. '\0' .. ARGV[4 + j] then
      redis.call('PEXPIRE', KEYS[j + 1], ttl)
    else
      out[#out + 1] = j
    end
  end
elseif op == 'release' then
  -- ARGV[4 + j] = the epoch this replica holds lease j with: deleted only if it still does.
  for j = 1, n do
    if redis.call('GET', KEYS[j + 1]) == me .. '\0' .. ARGV[4 + j] then redis.call('DEL', KEYS[j + 1]) end
  end
elseif op == 'map' then
  -- ARGV[4 + j] = the partition of lease j. Appends per lease: its value ('' when free), its
  -- milliseconds to live (negative when free), the last epoch given ('' when never).
  for j = 1, n do
    out[#out + 1] = redis.call('GET', KEYS[j + 1]) or ''
    out[#out + 1] = redis.call('PTTL', KEYS[j + 1])
    out[#out + 1] = redis.call('HGET', KEYS[1], ARGV[4 + j]) or ''
  end
else
  return redis.error_reply('unknown lease op ' .. tostring(op))
end
return out
