-- An identity's shared rate bucket (hubsvc/storage/redis_store/rate.py): the posts-per-second token
-- bucket every replica of the store draws from. KEYS[1] = the bucket, a hash: t = tokens, at = when
-- they were last refilled (seconds on the replicas' clock). ARGV = now, posts per second, burst, n,
-- keep_ms. n > 0 takes up to n whole tokens; n < 0 gives -n back (never above the burst). The key
-- lives keep_ms (at least the time the bucket takes to fill): a bucket gone is a full one.
-- Returns {tokens taken, seconds until the next whole token (as text; "0" when one is left)}.
local now, rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local n, keep = tonumber(ARGV[4]), tonumber(ARGV[5])
local stored = redis.call('HMGET', KEYS[1], 't', 'at')
local t, at = tonumber(stored[1]) or burst, tonumber(stored[2]) or now
if now > at then
  t = math.min(burst, t + (now - at) * rate)  -- a clock behind the last refill refills nothing
  at = now
end
local taken = 0
if n > 0 then
  taken = math.min(n, math.floor(t))
  t = t - taken
else
  t = math.min(burst, t - n)
end
redis.call('HSET', KEYS[1], 't', string.format('%.17g', t), 'at', string.format('%.17g', at))
redis.call('PEXPIRE', KEYS[1], keep)
local wait = 0
if t < 1 then wait = (1 - t) / rate end
return {taken, string.format('%.17g', wait)}
