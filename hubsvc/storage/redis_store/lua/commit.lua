#!lua
-- The commit script of RedisHubStore (hubsvc/storage/redis_store/commit.py runs it, plan.py builds
-- its arguments). ARGV[1] = the deadline in microseconds of Redis's TIME (0 = none); ARGV[2] =
-- number of check ops; then the check ops; then the write ops. Each op is an opcode followed by its
-- operands; key operands are 1-based indexes into KEYS. Returns {1, seconds, microseconds} (Redis's
-- TIME when it ran) when written, {0, reason} (having written nothing) on a conflict ({4, reason, held}
-- when a 'hold' check finds a holder at its limit), {2, reason} (nothing written) when it runs after
-- its deadline, {3, seconds, microseconds} (nothing written) when a 'once' check finds the bundle's
-- global part applied already (spread layout, hubsvc/storage/redis_store/spread.py), {5, reason,
-- partition} (nothing written) when a 'fence' or 'epoch' check finds a partition's lease lost.
local a = ARGV
local function k(i) return KEYS[tonumber(a[i])] end
local function tokens_of(hashes, set)
  -- an execution's call tokens: {hash, expiry} pairs (expiry: the last part of the packed row)
  local out = {}
  for _, h in ipairs(redis.call('SMEMBERS', set)) do
    local packed, at, part = redis.call('HGET', hashes, h), 1, nil
    if packed then
      while at <= #packed do
        local b1, b2, b3, b4 = string.byte(packed, at, at + 3)
        local size = ((b1 * 256 + b2) * 256 + b3) * 256 + b4
        part = string.sub(packed, at + 4, at + 3 + size)
        at = at + 4 + size
      end
    end
    out[#out + 1] = {h, tonumber(part or '0')}
  end
  return out
end
local deadline = tonumber(a[1])
local now = redis.call('TIME')
if deadline > 0 then
  local late = tonumber(now[1]) * 1000000 + tonumber(now[2]) - deadline
  if late > 0 then return {2, 'the commit reached Redis ' .. late .. ' us after its deadline'} end
end
local nchecks, i = tonumber(a[2]), 3
for _ = 1, nchecks do
  local op = a[i]
  if op == 'fence' then
    -- lease key, the value it must hold ('<replica id>\0<epoch>'), partition: the writer still holds
    -- the partition's lease with the epoch it fenced the bundle with, and the lease has not lapsed
    -- (an expired key reads as absent: Redis's own clock decides)
    if redis.call('GET', k(i + 1)) ~= a[i + 2] then
      return {5, 'this hub replica no longer holds partition ' .. a[i + 3] .. ' with the epoch it wrote under '
              .. '(its lease lapsed or another replica took it)', a[i + 3]}
    end
    i = i + 4
  elseif op == 'epoch' then
    -- (spread) the channel's fence key, the writer's epoch of the channel's partition, partition, until
    -- when the writer's lease holds (Redis TIME, microseconds): the lease has not run out, and no later
    -- owner of the partition wrote to the channel (the epoch its writes leave in the fence key is not higher)
    local latest = tonumber(redis.call('GET', k(i + 1)) or '0')
    if latest > tonumber(a[i + 2]) or tonumber(now[1]) * 1000000 + tonumber(now[2]) >= tonumber(a[i + 4]) then
      return {5, 'this hub replica no longer holds partition ' .. a[i + 3] .. ' with the epoch it wrote under '
              .. '(its lease ran out or a later owner wrote to the channel)', a[i + 3]}
    end
    i = i + 5
  elseif op == 'seq' then
    local last = tonumber(redis.call('GET', k(i + 1)) or '0')
    if last ~= tonumber(a[i + 2]) then
      return {0, 'channel ' .. a[i + 3] .. ' is at seq ' .. last .. ', not ' .. a[i + 2]}
    end
    i = i + 4
  elseif op == 'idem' then
    if redis.call('HEXISTS', k(i + 1), a[i + 2]) == 1 then
      return {0, 'idempotency key already taken in channel ' .. a[i + 3]}
    end
    i = i + 4
  elseif op == 'name' then
    local owner = redis.call('HGET', k(i + 1), a[i + 2])
    if owner and owner ~= a[i + 3] then return {0, 'agent name ' .. a[i + 2] .. ' is taken'} end
    i = i + 4
  elseif op == 'task' then
    -- tasks hash, live set, task id, 'new' (no such task yet) or 'live' (stored and not ended)
    local known = redis.call('HEXISTS', k(i + 1), a[i + 3]) == 1
    if a[i + 4] == 'new' and known then return {0, 'task ' .. a[i + 3] .. ' already exists'} end
    if a[i + 4] == 'live' and not (known and redis.call('SISMEMBER', k(i + 2), a[i + 3]) == 1) then
      return {0, 'task ' .. a[i + 3] .. ' is not running'}
    end
    i = i + 5
  elseif op == 'once' then
    -- done zset, bundle id: a bundle whose global part was applied already writes nothing again
    if redis.call('ZSCORE', k(i + 1), a[i + 2]) then return {3, now[1], now[2]} end
    i = i + 3
  elseif op == 'after' then
    -- (spread) the channel's last-bundle key, the bundle id it must hold, channel id: the bundle
    -- written before this one in the same group committed (and nothing else came in between)
    if redis.call('GET', k(i + 1)) ~= a[i + 2] then
      return {0, 'an earlier write to channel ' .. a[i + 3] .. ' in the same group was not written'}
    end
    i = i + 4
  elseif op == 'hold' then
    -- holder set, live set, reservations zset, limit, member, what, n, then n pairs (member, '1' live /
    -- '0' ended) this commit writes before this row: the holder may add member only while it holds
    -- fewer than limit live ones, or holds member already. A member of the holder set counts while
    -- it is in the live set or reserved (spread layout: its channel part is on its way), so one a
    -- writer left behind counts for nothing once its reservation lapsed
    local id, limit, n = a[i + 5], tonumber(a[i + 4]), tonumber(a[i + 7])
    local earlier, held, has = {}, 0, false
    for j = 0, n - 1 do earlier[a[i + 8 + 2 * j]] = a[i + 9 + 2 * j] == '1' end
    for _, m in ipairs(redis.call('SMEMBERS', k(i + 1))) do
      if earlier[m] == nil and (redis.call('SISMEMBER', k(i + 2), m) == 1
          or tonumber(redis.call('ZSCORE', k(i + 3), m) or '0') > tonumber(now[1])) then
        held = held + 1
        if m == id then has = true end
      end
    end
    for m, live in pairs(earlier) do
      if live then
        held = held + 1
        if m == id then has = true end
      end
    end
    if not has and held >= limit then
      return {4, a[i + 6] .. ' limit of ' .. limit .. ' reached (' .. held .. ' held)', held}
    end
    i = i + 8 + 2 * n
  elseif op == 'running' then
    -- running set, execution id: a call token is stored only while its execution runs
    if redis.call('SISMEMBER', k(i + 1), a[i + 2]) == 0 then
      return {0, 'execution ' .. a[i + 2] .. ' is not running'}
    end
    i = i + 3
  elseif op == 'tokens' then
    -- token hash, the execution's token set, limit, issued at, execution id, tokens of it this
    -- commit writes before: a new call token only while its unexpired ones stay below the limit
    local held, now_t = tonumber(a[i + 6]), tonumber(a[i + 4])
    for _, t in ipairs(tokens_of(k(i + 1), k(i + 2))) do
      if t[2] > now_t then held = held + 1 end
    end
    if held >= tonumber(a[i + 3]) then
      return {4, 'execution ' .. a[i + 5] .. ' holds ' .. held .. ' unexpired call tokens, its limit of ' .. a[i + 3],
              held}
    end
    i = i + 7
  else
    return redis.error_reply('unknown check op ' .. tostring(op))
  end
end
while i <= #a do
  local op = a[i]
  if op == 'xadd' then
    local n = tonumber(a[i + 3])
    local args = {'XADD', k(i + 1), a[i + 2]}
    for j = 0, 2 * n - 1 do args[#args + 1] = a[i + 4 + j] end
    redis.call(unpack(args))
    i = i + 4 + 2 * n
  elseif op == 'feed' then
    -- stream, counter, approximate max length, n field/value pairs
    local n = tonumber(a[i + 4])
    local number = redis.call('INCR', k(i + 2))
    local args = {'XADD', k(i + 1), 'MAXLEN', '~', a[i + 3], number .. '-0'}
    for j = 0, 2 * n - 1 do args[#args + 1] = a[i + 5 + j] end
    redis.call(unpack(args))
    i = i + 5 + 2 * n
  elseif op == 'notify' then
    -- where hash, global key prefix, approximate max length, committing replica, wall time, channel
    -- count, then per channel: id, last seq, its watch set, member count, members. Each channel's last
    -- seq is told to the replicas its members' Connect streams are on (where hash: agent ->
    -- '<replica>\0<session>') and those in its watch set, each replica once, in one entry of its own
    -- notice stream '<prefix>notices:<replica>' numbered by '<prefix>notices_seq:<replica>'; a replica
    -- whose liveness key '<prefix>replica:<replica>' lapsed is told nothing (it refreshes everything
    -- when it finds it lapsed). The committing replica is not told (it published already).
    local where, prefix, maxlen, origin, wall = k(i + 1), a[i + 2], a[i + 3], a[i + 4], a[i + 5]
    local at, told, order = i + 7, {}, {}
    for _ = 1, tonumber(a[i + 6]) do
      local channel, seq, m = a[at], tonumber(a[at + 1]), tonumber(a[at + 3])
      local targets = redis.call('SMEMBERS', k(at + 2))
      for j = 1, m do
        local held = redis.call('HGET', where, a[at + 3 + j])
        if held then
          local cut = string.find(held, '\0', 1, true)
          targets[#targets + 1] = cut and string.sub(held, 1, cut - 1) or held
        end
      end
      for _, replica in ipairs(targets) do
        if replica ~= origin then
          local channels = told[replica]
          if channels == nil then
            channels = {}
            told[replica] = channels
            order[#order + 1] = replica
          end
          channels[channel] = seq
        end
      end
      at = at + 4 + m
    end
    for _, replica in ipairs(order) do
      if redis.call('EXISTS', prefix .. 'replica:' .. replica) == 1 then
        local number = redis.call('INCR', prefix .. 'notices_seq:' .. replica)
        redis.call('XADD', prefix .. 'notices:' .. replica, 'MAXLEN', '~', maxlen, number .. '-0',
                   'r', origin, 'j', cjson.encode({c = told[replica]}), 'w', wall)
      end
    end
    i = at
  elseif op == 'set' then
    redis.call('SET', k(i + 1), a[i + 2]); i = i + 3
  elseif op == 'del' then
    redis.call('DEL', k(i + 1)); i = i + 2
  elseif op == 'hset' then
    redis.call('HSET', k(i + 1), a[i + 2], a[i + 3]); i = i + 4
  elseif op == 'hdel' then
    redis.call('HDEL', k(i + 1), a[i + 2]); i = i + 3
  elseif op == 'hdelif' then
    if redis.call('HGET', k(i + 1), a[i + 2]) == a[i + 3] then redis.call('HDEL', k(i + 1), a[i + 2]) end
    i = i + 4
  elseif op == 'observe' then
    -- observed hash of an agent, capability, outcome, latency ms, time: add 1 to the outcome's count
    redis.call('HINCRBY', k(i + 1), a[i + 2] .. '\0' .. a[i + 3], 1)
    redis.call('HSET', k(i + 1), a[i + 2] .. '\0latency', a[i + 4], a[i + 2] .. '\0at', a[i + 5])
    i = i + 6
  elseif op == 'hsetnx' then
    redis.call('HSETNX', k(i + 1), a[i + 2], a[i + 3]); i = i + 4
  elseif op == 'sadd' then
    redis.call('SADD', k(i + 1), a[i + 2]); i = i + 3
  elseif op == 'srem' then
    redis.call('SREM', k(i + 1), a[i + 2]); i = i + 3
  elseif op == 'cursor' then
    local cur = tonumber(redis.call('HGET', k(i + 1), a[i + 2]) or '-1')
    if tonumber(a[i + 3]) > cur then redis.call('HSET', k(i + 1), a[i + 2], a[i + 3]) end
    i = i + 4
  elseif op == 'agent' then
    -- agents, names, name_of, id, packed row, name, removed
    local names, name_of, id = k(i + 2), k(i + 3), a[i + 4]
    local old = redis.call('HGET', name_of, id)
    if old and redis.call('HGET', names, old) == id then redis.call('HDEL', names, old) end
    if a[i + 7] == '0' then
      redis.call('HSET', names, a[i + 6], id)
      redis.call('HSET', name_of, id, a[i + 6])
    else
      redis.call('HDEL', name_of, id)
    end
    redis.call('HSET', k(i + 1), id, a[i + 5])
    i = i + 8
  elseif op == 'channel' then
    -- meta, order counter, live set, members set, channel id, live, record, seed, n, member zsets..., member ids...
    local meta, id, n = k(i + 1), a[i + 5], tonumber(a[i + 9])
    local order = redis.call('HGET', meta, 'order')
    if not order then
      order = redis.call('INCR', k(i + 2))
      redis.call('HSET', meta, 'order', order)
    end
    redis.call('HSET', meta, 'live', a[i + 6], 'record', a[i + 7], 'seed', a[i + 8])
    if a[i + 6] == '1' then redis.call('SADD', k(i + 3), id) else redis.call('SREM', k(i + 3), id) end
    for j = 1, n do
      local member = a[i + 9 + n + j]
      redis.call('SADD', k(i + 4), member)
      redis.call('ZADD', KEYS[tonumber(a[i + 9 + j])], 'NX', order, id)
    end
    i = i + 10 + 2 * n
  elseif op == 'exec' then
    -- record hash, meta hash, counter, all zset, root zset, caller roots, target roots, running set,
    -- id, record, packed meta, running, started_at, root
    local id = a[i + 9]
    if redis.call('HEXISTS', k(i + 2), id) == 0 then
      local member = string.format('%020d', redis.call('INCR', k(i + 3))) .. ':' .. id
      redis.call('HSET', k(i + 2), id, a[i + 11])
      redis.call('ZADD', k(i + 4), a[i + 13], member)
      redis.call('ZADD', k(i + 5), a[i + 13], member)
      redis.call('SADD', k(i + 6), a[i + 14])
      redis.call('SADD', k(i + 7), a[i + 14])
    end
    redis.call('HSET', k(i + 1), id, a[i + 10])
    if a[i + 12] == '1' then redis.call('SADD', k(i + 8), id) else redis.call('SREM', k(i + 8), id) end
    i = i + 15
  elseif op == 'chmeta' then
    -- (spread) meta, members set, live, record, seed, n, member ids...
    local n = tonumber(a[i + 6])
    redis.call('HSET', k(i + 1), 'live', a[i + 3], 'record', a[i + 4], 'seed', a[i + 5])
    for j = 1, n do redis.call('SADD', k(i + 2), a[i + 6 + j]) end
    i = i + 7 + n
  elseif op == 'chglobal' then
    -- (spread) order zset, order counter, live set, channel id, live, n, member zsets...
    local id, n = a[i + 4], tonumber(a[i + 6])
    local order = redis.call('ZSCORE', k(i + 1), id)
    if not order then
      order = redis.call('INCR', k(i + 2))
      redis.call('ZADD', k(i + 1), order, id)
    end
    if a[i + 5] == '1' then redis.call('SADD', k(i + 3), id) else redis.call('SREM', k(i + 3), id) end
    for j = 1, n do redis.call('ZADD', KEYS[tonumber(a[i + 6 + j])], 'NX', order, id) end
    i = i + 7 + n
  elseif op == 'done' then
    -- (spread) done zset, bundle id, seconds to remember it once its outbox entry is gone: done
    -- until then (score +inf); the store rescores it with the time it deleted the outbox entry
    redis.call('ZADD', k(i + 1), '+inf', a[i + 2])
    redis.call('ZREMRANGEBYSCORE', k(i + 1), '-inf', '(' .. (tonumber(now[1]) - tonumber(a[i + 3])))
    i = i + 4
  elseif op == 'reserve' then
    -- (spread) reservations zset, member, seconds: the member counts as held until then
    redis.call('ZREMRANGEBYSCORE', k(i + 1), '-inf', now[1])
    redis.call('ZADD', k(i + 1), tonumber(now[1]) + tonumber(a[i + 3]), a[i + 2])
    i = i + 4
  elseif op == 'unreserve' then
    -- (spread) holder set, live set, reservations zset, member: its channel part was refused
    if redis.call('SISMEMBER', k(i + 2), a[i + 4]) == 0 then redis.call('SREM', k(i + 1), a[i + 4]) end
    redis.call('ZREM', k(i + 3), a[i + 4])
    i = i + 5
  elseif op == 'endtask' then
    -- tasks hash, live set, owner's holder set, task id, record: end the task if it is still live
    -- (a channel's close: a task another writer ended first keeps its end)
    if redis.call('SISMEMBER', k(i + 2), a[i + 4]) == 1 then
      redis.call('HSET', k(i + 1), a[i + 4], a[i + 5])
      redis.call('SREM', k(i + 2), a[i + 4])
      redis.call('SREM', k(i + 3), a[i + 4])
    end
    i = i + 6
  elseif op == 'untoken' then
    -- token hash, the execution's token set: forget every call token of an ended execution
    local hashes = redis.call('SMEMBERS', k(i + 2))
    for _, h in ipairs(hashes) do redis.call('HDEL', k(i + 1), h) end
    redis.call('DEL', k(i + 2))
    i = i + 3
  elseif op == 'tokroom' then
    -- token hash, the execution's token set, limit, issued at, grace: remove the tokens past
    -- expiry + grace, then the oldest expired ones while a new token would exceed the limit
    -- (hubsvc/storage/call_token_room.py make_room)
    local limit, now_t, grace = tonumber(a[i + 3]), tonumber(a[i + 4]), tonumber(a[i + 5])
    local held, expired, kept = tokens_of(k(i + 1), k(i + 2)), {}, 0
    for _, t in ipairs(held) do
      if t[2] + grace <= now_t then
        redis.call('HDEL', k(i + 1), t[1]); redis.call('SREM', k(i + 2), t[1])
      else
        kept = kept + 1
        if t[2] <= now_t then expired[#expired + 1] = t end
      end
    end
    table.sort(expired, function(x, y) return x[2] < y[2] or (x[2] == y[2] and x[1] < y[1]) end)
    for j = 1, math.min(#expired, kept + 1 - limit) do
      redis.call('HDEL', k(i + 1), expired[j][1]); redis.call('SREM', k(i + 2), expired[j][1])
    end
    i = i + 6
  elseif op == 'audit' then
    -- counter, records, all, by kind, by subject, packed record
    local id = redis.call('INCR', k(i + 1))
    redis.call('HSET', k(i + 2), id, a[i + 6])
    for j = 3, 5 do redis.call('ZADD', k(i + j), id, id) end
    i = i + 7
  else
    return redis.error_reply('unknown write op ' .. tostring(op))
  end
end
return {1, now[1], now[2]}
