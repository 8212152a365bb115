"""Redis implementation of :class:`HubStore` (``python -m hubsvc --store redis://HOST:PORT/DB``).

Same semantics as :mod:`hubsvc.storage.sqlite`: bundles are group-committed in submission
order, each atomically, a failing bundle fails alone and fences its channels
(:mod:`hubsvc.storage.group_commit`). docs/scale-out.md describes the deployment.

Key layout (``P`` = the key prefix, default ``agentnet:hub:``; ``{P}`` on a Cluster, below).
Every key of one channel carries the tag ``{c:<channel_id>}``:

* ``P{c:<id>}:wal`` — the WAL, a Stream whose entry ids are ``<seq>-0`` (``XRANGE`` reads by
  seq; a later step ``XREAD``\\s it for cross-replica delivery); field ``d`` = envelope bytes.
* ``P{c:<id>}:texts`` — EV_TEXT rows only, a Stream with the same ids: ``s`` sender,
  ``c`` created_at, ``x`` text (what SearchContext / QuoteContext scan).
* ``P{c:<id>}:last`` — the last committed seq; ``P{c:<id>}:idem`` — hash
  ``<sender>\\0<key>`` → seq; ``P{c:<id>}:replies`` — hash ``<sender>\\0<causation id>`` →
  the seq of that sender's first envelope answering that envelope (FindReply);
  ``P{c:<id>}:meta`` — hash live / record / seed / order; ``P{c:<id>}:members`` — set of agent ids.

Global records carry the hash tag ``{g}``: ``P{g}:agents`` (hash id → packed row),
``P{g}:agent_names`` / ``P{g}:agent_name_of`` (the live-name index, unique like SQLite's),
``P{g}:channels:live`` (set), ``P{g}:channel_order`` (counter),
``P{g}:member_channels:<agent>`` (zset channel → creation order), ``P{g}:envelopes``
(hash envelope id → channel, seq), ``P{g}:cursors:<agent>`` (hash channel → seq),
``P{g}:tasks`` / ``P{g}:task_meta`` / ``P{g}:tasks:live``, ``P{g}:checkpoints`` (hash task id →
packed owner, saved-at time, state), ``P{g}:observed:<agent>`` (hash ``<capability>\\0<outcome>`` →
count, ``…\\0latency``, ``…\\0at``), ``P{g}:exec`` /
``P{g}:exec:meta`` / ``P{g}:exec:all`` / ``P{g}:exec:root:<root>`` /
``P{g}:exec:roots_of:<agent>`` / ``P{g}:exec:running``, A2A call tokens ``P{g}:call_tokens``
(hash secret hash → execution, agent, expiry) with ``P{g}:call_tokens:<execution>`` (set of
its hashes, deleted with the execution's end), and ``P{g}:audit`` (hash id →
packed record) with ``P{g}:audit_seq`` (INCR) and id indexes ``P{g}:audit:all``,
``P{g}:audit:kind:<kind>``, ``P{g}:audit:subject:<subject>``; ``P{g}:feed`` with
``P{g}:feed_seq`` is the change feed the replicas follow (:mod:`hubsvc.storage.redis_feed`);
``P{g}:sessions`` (hash agent id → session id) names each identity's current Connect stream;
``P{g}:holds:channels:<agent>`` / ``P{g}:holds:tasks:<agent>`` (sets) are the live channels an
identity initiated and the running tasks it owns, kept by the commit script from the rows it
writes (what ``max_open_channels`` / ``max_running_tasks`` count), and ``P{g}:holdings`` marks
them complete (a store written before them gets them rebuilt at open).

A group of bundles is written by ONE Lua script (``EVALSHA``) naming every key it touches:
it first checks, for each channel, that the stored last seq equals the first new row's
seq − 1, that no idempotency key (nor live agent name) of the rows is taken, and that a task
row's expected state (``TaskRow.expect``: not stored yet / stored and running) holds, that
the execution of a new call token is still running (and, under ``CallTokenRow.hold_limit``,
holds fewer unexpired tokens than it: a :class:`LimitConflict` otherwise; the ``tokroom`` write
then removes the expired ones that make room), and that a holder opening a channel or
starting a task under a limit (``hold_limit``) holds fewer than it (a :class:`LimitConflict`
otherwise); on any
mismatch it writes nothing and returns the conflict, which :meth:`_apply` raises as
:class:`StoreConflict` (the group is then retried one bundle at a time, so only the
conflicting bundle fails). Otherwise it appends the rows and updates last seq, the
idempotency index, the channel record and the global records, and last appends the group's
entry to the change feed. On one Redis server a
script is atomic, so every bundle — channel and global keys together — is all or nothing.
On a Redis Cluster (``redis+cluster://`` URL, :mod:`hubsvc.storage.redis_connect`) the whole
prefix becomes the hash tag (``{P}`` in front of every key, e.g. ``{agentnet:hub:}{c:<id>}:wal``),
so every key of the hub is in one slot and the same atomic script runs on that slot's master.

With ``?spread=1`` on a Cluster URL (:attr:`RedisHubStore.spread`) each channel's keys carry the
channel's own hash tag, ``{Pc:<id>}:wal`` etc., plus ``{Pc:<id>}:outbox`` (bundle id → the
bundle's global part, while pending) and ``{Pc:<id>}:lastb`` (last bundle written); the global
keys keep ``{P}{g}:`` and add ``channels:order`` (creation order), ``outbox:done`` and
``holds:reserved`` (open-channel slots reserved before their channel part). A bundle
is then written as a channel part (checks, WAL, channel record, outbox entry: one script on the
channel's slot) followed by its global part (one script on the global slot that applies once,
by the done set); a bundle opening a channel under a limit first reserves its slot with one
script on the global slot (released if the channel part is refused, else it lapses);
:meth:`RedisHubStore.complete_pending` applies global parts left behind by a
writer that died between the two (at open and every :data:`OUTBOX_SWEEP` seconds).
docs/scale-out.md "Channels spread over the shards".

A write is acknowledged only once Redis has replied. Whether Redis then survives its own
crash depends on its persistence settings: :meth:`open` reads ``appendonly`` /
``appendfsync`` and warns when the append-only file is off.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import struct
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any, ParamSpec, TypeVar, cast

import redis.exceptions
from agentnet.v1 import envelope_pb2
from redis.asyncio.cluster import RedisCluster

from hubsvc.storage import redis_feed
from hubsvc.storage.base import (
    TASK_IF_LIVE,
    TASK_LIVE,
    TASK_NEW,
    AgentRow,
    AuditRow,
    CallTokenRow,
    ChannelRow,
    CheckpointRow,
    ExecutionRow,
    LimitConflict,
    ObservedCounts,
    StoreConflict,
    StoreUnconfirmed,
    TaskRow,
    WalRow,
    Writes,
)
from hubsvc.storage.group_commit import GroupCommitStore, PartlyWritten
from hubsvc.storage.redis_connect import RedisClient, connect, is_cluster_url, parse_cluster_url
from hubsvc.storage.redis_feed import RedisChangeFeed
from hubsvc.storage.redis_liveness import RedisLiveness
from netkernel.errors import Unavailable

log = logging.getLogger("agentnet.hub.storage")

DEFAULT_PREFIX = "agentnet:hub:"
DEFAULT_TIMEOUT = 5.0
"""Seconds a Redis connect or call may take before it fails (``--redis-timeout``)."""
DEFAULT_WAIT_TIMEOUT = 1.0
"""Seconds a commit waits for its Redis replicas' confirmation (``--redis-wait-timeout``)."""
_TEXT_SCAN_CHUNK = 2000
"""EV_TEXT rows one search script call examines at most (it blocks Redis while it runs)."""
_PAGE = 1000
"""Ids read per call where a read pages through an index."""
_WAL_CHANNELS = 256
"""Channels whose first WAL page one pipeline reads (hydrate)."""
OUTBOX_SWEEP = 5.0
"""Seconds between two looks for bundles whose global part is missing (spread layout): an entry
seen in two looks in a row is completed, so a replica that died between the parts is made up for
within about twice this."""
_DONE_KEEP = 60
"""Seconds a bundle id stays in the done set (spread layout) at least — at least ten times the
Redis timeout: every global part is sent with a deadline, and a completer reads the outbox entry
again just before sending it, so an entry is never applied later than that after it was done."""
HOLDINGS_MARK = "holdings"
"""Global key (``P{g}:holdings``) set once the holder sets (``P{g}:holds:…``) hold every live channel
and task: a store written before they existed has them rebuilt when a store opens it."""
REPLIES_MARK = "replies_indexed"
"""Global key (``P{g}:replies_indexed``) set once every channel's replies hash (FindReply) holds the
replies of its whole WAL: a store written before the hashes existed has them filled when a store
opens it (one pass over every WAL, once)."""
_REBUILD_CHUNK = 1000
"""Live channels or tasks one holder-set rebuild script call adds at most."""
_REBUILD_HOLDINGS = """#!lua
-- KEYS[1] the mark, KEYS[2] channels:live, KEYS[3] tasks:live, then holder sets; ARGV[1] '1' to set
-- the mark; then triples (which live set: 2 or 3, holder set index, member): add each still live
for i = 2, #ARGV, 3 do
  if redis.call('SISMEMBER', KEYS[tonumber(ARGV[i])], ARGV[i + 2]) == 1 then
    redis.call('SADD', KEYS[tonumber(ARGV[i + 1])], ARGV[i + 2])
  end
end
if ARGV[1] == '1' then redis.call('SET', KEYS[1], '1') end
return 1
"""
RESERVED = "holds:reserved"
"""Global zset (``P{g}:holds:reserved``, spread layout): channel id → until when its holder-set entry
counts although the channel is not live yet (its channel part is on its way)."""
_RESERVE_KEEP = 60
"""Seconds a reservation counts at least (at least ten times the Redis timeout): longer than a
writer takes between the reservation and its global part, or a sweep to complete that part."""
CRASH_BETWEEN_PARTS_ENV = "AGENTNET_HUB_TEST_CRASH_BETWEEN_PARTS"
"""Test-only fault: with the spread layout, a process whose environment sets this to an idempotency
key exits (``os._exit``) right after the channel part of the bundle carrying that key committed,
before its global part (tests/hub/test_redis_spread.py)."""

# The commit script. ARGV[1] = the deadline in microseconds of Redis's TIME (0 = none); ARGV[2] =
# number of check ops; then the check ops; then the write ops. Each op is an opcode followed by its
# operands; key operands are 1-based indexes into KEYS. Returns {1, seconds, microseconds} (Redis's
# TIME when it ran) when written, {0, reason} (having written nothing) on a conflict ({4, reason, held}
# when a 'hold' check finds a holder at its limit), {2, reason}
# (nothing written) when it runs after its deadline, {3, seconds, microseconds} (nothing written) when
# a 'once' check finds the bundle's global part applied already (spread layout, below).
_COMMIT = """#!lua
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
  if op == 'seq' then
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
  elseif op == 'set' then
    redis.call('SET', k(i + 1), a[i + 2]); i = i + 3
  elseif op == 'hset' then
    redis.call('HSET', k(i + 1), a[i + 2], a[i + 3]); i = i + 4
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
"""

# Scan EV_TEXT rows of one channel newest first, at most ARGV[2] rows from ARGV[1] ("+" or an
# exclusive "(<seq>-0"). ARGV[3]: 'q' = text contains ARGV[4] (ASCII case-insensitive, like
# SQLite's lower()), 's' = sender is ARGV[4]. Stops after ARGV[5] matches.
# Returns {exhausted (0/1), last id examined, {id, created_at, ...matches}}.
_SCAN_TEXTS = """
local entries = redis.call('XREVRANGE', KEYS[1], ARGV[1], '-', 'COUNT', tonumber(ARGV[2]))
local mode, needle, want = ARGV[3], ARGV[4], tonumber(ARGV[5])
if mode == 'q' then needle = string.lower(needle) end
local out, found, last = {}, 0, ''
for n, e in ipairs(entries) do
  last = e[1]
  local f, s, c, x = e[2], '', '', ''
  for j = 1, #f, 2 do
    if f[j] == 's' then s = f[j + 1] elseif f[j] == 'c' then c = f[j + 1] elseif f[j] == 'x' then x = f[j + 1] end
  end
  local hit
  if mode == 's' then hit = (s == needle) else hit = string.find(string.lower(x), needle, 1, true) ~= nil end
  if hit then
    out[#out + 1] = e[1]; out[#out + 1] = c; found = found + 1
    if found >= want then
      return {(n == #entries and #entries < tonumber(ARGV[2])) and 1 or 0, last, out}
    end
  end
end
return {(#entries < tonumber(ARGV[2])) and 1 or 0, last, out}
"""


class StoreUnreachable(ConnectionError):
    """Redis did not answer when the store was opened."""


class StoreLate(Exception):
    """A commit script ran after its deadline (the hub had given up waiting); it wrote nothing."""


#: What a Redis that does not answer (in time) raises: the store's failures no bundle causes.
_UNREACHABLE = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    StoreLate,
    redis.exceptions.ClusterDownError,  # a Cluster whose master of the hub's slot failed, until a replica takes over
    redis.exceptions.RedisClusterException,  # a Cluster none of whose nodes answers
)

_R = TypeVar("_R")
_P = ParamSpec("_P")


def _unavailable(exc: Exception) -> Unavailable:
    """The client-facing error of a read Redis did not answer."""
    err = Unavailable(
        f"the hub's store (Redis) did not answer ({type(exc).__name__}); nothing was changed — retry.",
        metadata={"cause": "store_unreachable"},
    )
    err.__cause__ = exc
    return err


def _read(fn: Callable[_P, Coroutine[Any, Any, _R]]) -> Callable[_P, Coroutine[Any, Any, _R]]:
    """A read that fails with UNAVAILABLE (not a bug's INTERNAL) when Redis does not answer in time.

    A read whose connection broke (the pool's connection to a Redis that has restarted since
    it was last used) is tried once more, on a new connection: reads change nothing. Writes
    are never retried this way: a commit script whose reply was lost may have run."""

    @functools.wraps(fn)
    async def read(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            try:
                return await fn(*args, **kwargs)
            except redis.exceptions.ConnectionError:
                return await fn(*args, **kwargs)
        except _UNREACHABLE as exc:
            raise _unavailable(exc) from exc

    return read


class RedisHubStore(GroupCommitStore):
    """The hub's state in Redis (one server or a Cluster; see the module docstring for the key layout).

    ``url_or_client`` is a Redis URL (``redis://``, or ``redis+cluster://`` for a Cluster: the
    store creates and closes its client, whose connects and calls give up after ``timeout``
    seconds) or a ``redis.asyncio.Redis`` / ``redis.asyncio.cluster.RedisCluster`` built with
    ``decode_responses=False`` (the caller keeps it and sets its timeouts; ``timeout`` then
    only sets the commit deadline).
    """

    kind = "redis"

    def __init__(
        self,
        url_or_client: str | RedisClient,
        *,
        prefix: str = DEFAULT_PREFIX,
        timeout: float = DEFAULT_TIMEOUT,
        wait_replicas: int = 0,
        wait_timeout: float = DEFAULT_WAIT_TIMEOUT,
        spread: bool = False,
        sweep_interval: float = OUTBOX_SWEEP,
    ) -> None:
        super().__init__()
        if "{" in prefix or "}" in prefix:
            raise ValueError(f"the key prefix may not contain braces (they delimit hash tags): {prefix!r}")
        if not 0 < timeout < float("inf"):
            raise ValueError(f"the Redis timeout must be a positive number of seconds, not {timeout!r}")
        if wait_replicas and isinstance(url_or_client, str) and is_cluster_url(url_or_client):
            raise ValueError(
                "--redis-wait-replicas is not supported with a Redis Cluster store yet: a Cluster's own "
                "replicas and failover protect its shards (docs/scale-out.md)"
            )
        if wait_replicas < 0:
            raise ValueError(f"the number of Redis replicas to wait for may not be negative, not {wait_replicas!r}")
        if wait_replicas and not 0 < wait_timeout < timeout:
            raise ValueError(
                f"the Redis replica wait ({wait_timeout!r} s) must be positive and shorter than the Redis "
                f"timeout ({timeout!r} s), or the commit call would time out first"
            )
        self._timeout = timeout
        self._wait_replicas = wait_replicas
        self._wait_ms = max(1, int(wait_timeout * 1000))
        self._offset_us = 0.0
        """Redis's clock minus this host's, in microseconds, as last measured (see :meth:`_redis_now_us`)."""
        if isinstance(url_or_client, str):
            spread = spread or (is_cluster_url(url_or_client) and parse_cluster_url(url_or_client).spread)
            self._client: RedisClient = connect(url_or_client, timeout)
            self._owns_client = True
        else:
            if _connection_kwargs(url_or_client).get("decode_responses"):
                raise ValueError("RedisHubStore needs a client with decode_responses=False (it stores bytes)")
            self._client, self._owns_client = url_or_client, False
        if spread and not isinstance(self._client, RedisCluster):
            raise ValueError("spread=1 spreads channels over a Redis Cluster's shards: use a redis+cluster:// URL")
        self.spread = spread
        """Each channel's keys carry the channel's own hash tag (spread over the Cluster's slots)."""
        self._sweep_interval = sweep_interval
        self._sweeper: asyncio.Task[None] | None = None
        self._sweep_stop = asyncio.Event()
        self._forgetting: set[asyncio.Task[None]] = set()
        """Deletions of applied outbox entries under way."""
        self._seen: set[tuple[bytes, bytes]] = set()
        """Outbox entries (key, bundle id) the last sweep found pending."""
        self._raw_prefix = prefix
        # On a Cluster the prefix is the hash tag of every key: one slot, so one atomic script. With
        # spread, the global keys keep that tag and each channel's keys get the channel's own.
        self._p = f"{{{prefix}}}" if isinstance(self._client, RedisCluster) else prefix
        self._g = self._p + "{g}:"
        self._commit_script = self._client.register_script(_COMMIT)
        self.feed: RedisChangeFeed = RedisChangeFeed(
            self._client,
            self._g + "feed",
            self._g + "feed_seq",
            self._on_home_node if isinstance(self._client, RedisCluster) else None,
        )
        self.liveness: RedisLiveness = RedisLiveness(self._client, self._g + "replica:", self.feed.replica_id)
        self._scan_script = self._client.register_script(_SCAN_TEXTS)
        self._rebuild_script = self._client.register_script(_REBUILD_HOLDINGS)

    @property
    def timeout(self) -> float:
        """Seconds a Redis call may take (``--redis-timeout``); a commit's deadline is this after sending."""
        return self._timeout

    @property
    def prefix(self) -> str:
        """The key prefix of this store."""
        return self._p

    @property
    def address(self) -> str:
        """``host:port/db`` of the server, or ``cluster host:port,…`` (no credentials), for messages."""
        if isinstance(self._client, RedisCluster):
            return "cluster " + ",".join(node.name for node in self._client.startup_nodes)
        kwargs = self._client.connection_pool.connection_kwargs
        if "path" in kwargs:
            return f"unix:{kwargs['path']}/{kwargs.get('db', 0)}"
        return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"

    # -- keys ------------------------------------------------------------------------

    def channel_key(self, channel_id: str, name: str) -> str:
        """The key ``name`` (``wal``, ``last``, …) of one channel: its slot is the channel's shard."""
        return self._c(channel_id, name)

    def holder_key(self, kind: str, agent_id: str) -> str:
        """The set of live ``kind`` ("channels": those the identity initiated; "tasks": those it owns
        and runs) an identity holds, kept by the commit script (what the governance limits count)."""
        return f"{self._g}holds:{kind}:{agent_id}"

    def _c(self, channel_id: str, name: str) -> str:
        """A key of one channel (hash tag ``{c:<id>}``; ``{<prefix>c:<id>}`` with the spread layout)."""
        if self.spread:
            return f"{{{self._raw_prefix}c:{channel_id}}}:{name}"
        return f"{self._p}{{c:{channel_id}}}:{name}"

    def _on_home_node(self) -> dict[str, Any]:
        """Arguments that send a keyless command (TIME, CONFIG) where the commit script runs: on a
        Cluster, to the master of the hub's slot (asked again on every call: a failover moves it)."""
        if isinstance(self._client, RedisCluster):
            return {"target_nodes": self._client.get_node_from_key(self._g + "feed")}
        return {}

    # -- lifecycle ---------------------------------------------------------------------

    async def open(self) -> None:
        """Check that Redis answers, warn if its persistence cannot keep acked writes, start the writer."""
        try:
            await self._client.ping()
        except _UNREACHABLE as exc:
            raise StoreUnreachable(f"cannot reach Redis at {self.address}: {exc}") from exc
        await self._check_layout()
        await self._rebuild_holdings()
        await self._index_replies()
        await self._check_durability()
        await self._measure_offset()
        self._start_writer()
        if self.spread:
            await self._register_scripts()
            await self.complete_pending(immediately=True)
            self._sweep_stop.clear()
            self._sweeper = asyncio.create_task(self._sweep_loop(), name="hub-store-outbox-sweep")

    async def _check_layout(self) -> None:
        """Refuse to open keys written with the other layout (``spread``): replicas sharing a store
        must agree on where a channel's keys are. The first store to open records its layout."""
        key = self._g + "layout"
        mine = "spread" if self.spread else "single"
        if not isinstance(self._client, RedisCluster):
            return
        stored = await self._client.get(key)
        if stored is None:
            # Keys written before the layout was recorded are the single-slot layout.
            existing = await self._client.exists(self._g + "feed_seq")
            if existing and self.spread:
                stored = b"single"
            else:
                await self._client.set(key, mine, nx=True)
                stored = await self._client.get(key)
        if _text(stored or b"") != mine:
            raise ValueError(
                f"the hub's keys under prefix {self._raw_prefix!r} were written with "
                f"spread={'1' if mine == 'single' else '0'} and this store has spread={'1' if self.spread else '0'}: "
                "give every replica the same --store URL"
            )

    async def _rebuild_holdings(self) -> None:
        """Fill the holder sets from the live channels and tasks, once per store (:data:`HOLDINGS_MARK`).

        Idempotent, so replicas opening an old store at once may both do it: each member is added
        only if it is still live when the script runs, and rows committed meanwhile keep the sets
        themselves."""
        mark = self._g + HOLDINGS_MARK
        if await self._client.exists(mark):
            return
        entries = [(2, self.holder_key("channels", row.member_ids()[0]), row.channel_id)
                   for row in await self.load_live_channels()]  # fmt: skip
        entries += [(3, self.holder_key("tasks", t.owner_id), t.task_id) for t in await self.load_tasks(live_only=True)]
        for low in range(0, max(len(entries), 1), _REBUILD_CHUNK):
            part = _Part()
            for key in (mark, self._g + "channels:live", self._g + "tasks:live"):
                part.k(key)
            args: list[Any] = ["1" if low + _REBUILD_CHUNK >= len(entries) else "0"]
            for live, holder, member in entries[low : low + _REBUILD_CHUNK]:
                args += [live, part.k(holder), member]
            await self._rebuild_script(keys=part.keys, args=args)
        if entries:
            log.info(
                "rebuilt the holder sets of %d live channels and tasks (a store written before them)", len(entries)
            )

    async def _index_replies(self) -> None:
        """Fill the replies hashes from every WAL, once per store (:data:`REPLIES_MARK`).

        A new store is marked at once. HSETNX in seq order keeps each sender's first reply, and is
        idempotent, so replicas opening an old store at once may both do it; a reply committed
        meanwhile (by a replica already running) is one too, so FindReply stays right."""
        mark = self._g + REPLIES_MARK
        if await self._client.exists(mark):
            return
        ids = [row.channel_id for _, row in await self.list_channels(live_only=False, before=0, limit=2**62)]
        indexed = 0
        async for channel_id, datas in self.scan_wal(ids):
            replies = self._c(channel_id, "replies")
            async with self._client.pipeline(transaction=False) as pipe:
                for data in datas:
                    env = envelope_pb2.Envelope.FromString(data)
                    if env.HasField("causation_id") and env.causation_id:
                        pipe.hsetnx(replies, _idem_field(env.sender_id, env.causation_id), env.seq)
                        indexed += 1
                await pipe.execute()
        await self._client.set(mark, "1")
        if indexed:
            log.info("indexed %d replies of %d channels for FindReply (a store written before it)", indexed, len(ids))

    async def _register_scripts(self) -> None:
        """Load the commit script on every master (pipelined calls use EVALSHA without a fallback)."""
        self._commit_script.sha = _text(await self._client.script_load(_COMMIT))

    async def _check_durability(self) -> None:
        try:
            config = await self._client.config_get("append*", **self._on_home_node())
        except redis.exceptions.ResponseError as exc:  # CONFIG renamed or disabled by the operator
            log.warning("could not read Redis's persistence settings (%s); make sure appendonly is yes", exc)
            return
        settings = {_text(k): _text(v) for k, v in config.items() if k is not None and v is not None}
        if settings.get("appendonly") != "yes":
            log.warning(
                "Redis runs with appendonly=%s: acknowledged posts are lost if Redis restarts. Set "
                "'appendonly yes' and 'appendfsync always' (or everysec: at most 1 s lost on power loss); "
                "docs/scale-out.md",
                settings.get("appendonly", "?"),
            )
        elif settings.get("appendfsync") != "always":
            log.info(
                "Redis appendfsync=%s: a power loss may lose up to about a second of acknowledged writes "
                "(a killed hub process loses none)",
                settings.get("appendfsync", "?"),
            )

    async def close(self) -> None:
        """Drain the queue, stop the writer and close the client if the store created it."""
        if self._sweeper is not None:
            self._sweep_stop.set()
            await self._sweeper
            self._sweeper = None
        await self._stop_writer()
        if self._forgetting:
            await asyncio.gather(*self._forgetting)
        if self._owns_client:
            await self._client.aclose()

    # -- writes ------------------------------------------------------------------------

    async def _apply(self, group: list[Writes]) -> None:
        """Write the bundles with one script call; raise :class:`StoreConflict` (nothing written) on a conflict.

        The script carries a deadline, ``timeout`` after it is sent, in Redis's own clock (the
        offset is measured, see :meth:`_learn_offset`): one that reaches a stalled Redis only
        after the store gave up on it (and failed its callers) writes nothing.
        """
        if self.spread:
            await self._apply_spread(group)
            return
        plan = _Plan(self)
        for writes in group:
            plan.add(writes)
        if plan.empty:
            return
        sent = time.monotonic()
        deadline = int(sent * 1_000_000 + self._offset_us + self._timeout * 1_000_000)
        args = [deadline, *plan.args()]
        confirmed = 0
        if self._wait_replicas:
            result, confirmed = await self._commit_and_wait(plan.keys, args)
        else:
            result = cast("list[Any]", await self._commit_script(keys=plan.keys, args=args))
        if int(result[0]) == 2:
            await self._measure_offset()  # in case Redis's clock was stepped since the last measurement
            raise StoreLate(f"{_text(result[1])}: Redis stalled longer than the --redis-timeout")
        if int(result[0]) != 1:
            raise _conflict(result)
        self._learn_offset(int(result[1]) * 1_000_000 + int(result[2]), sent, time.monotonic())
        if confirmed < self._wait_replicas:
            raise StoreUnconfirmed(
                f"only {int(confirmed)} of the {self._wait_replicas} Redis replicas required "
                f"(--redis-wait-replicas) confirmed it within {self._wait_ms} ms"
            )

    async def _commit_and_wait(self, keys: list[str], args: list[Any]) -> tuple[list[Any], int]:
        """Run the commit script and then ``WAIT`` for the replicas, on one connection in one round
        trip (a pipeline): WAIT counts the replicas holding every write of *its* connection. Returns
        the script's result and the number of replicas that confirmed."""
        for attempt in (1, 2):
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.evalsha(self._commit_script.sha, len(keys), *keys, *args)
                pipe.wait(self._wait_replicas, self._wait_ms)
                try:
                    result, confirmed = cast("tuple[list[Any], int]", await pipe.execute())
                except redis.exceptions.NoScriptError:  # Redis restarted without it: nothing was written
                    if attempt == 2:
                        raise
                    self._commit_script.sha = _text(await self._client.script_load(_COMMIT))
                    continue
                return result, int(confirmed)
        raise AssertionError("unreachable")

    def _deadline(self) -> tuple[float, int]:
        """(now on this host's monotonic clock, the deadline of a script sent now in Redis's microseconds)."""
        sent = time.monotonic()
        return sent, int(sent * 1_000_000 + self._offset_us + self._timeout * 1_000_000)

    async def _apply_spread(self, group: list[Writes]) -> None:
        """Write the bundles with the spread layout; raise :class:`PartlyWritten` naming each failure.

        Every bundle's channel part (its checks, WAL rows, last seq, idempotency keys, channel
        record and members, and its outbox entry) runs as one script on the channel's slot — all
        bundles' parts in one pipeline, which sends each node its parts in submission order. Then
        the global parts of the bundles whose channel part committed (and of the bundles without
        one) run on the global slot, in submission order, in a second pipeline. Only channel
        parts (and bundles without one) can be refused, so a bundle is either refused having
        written nothing or written whole, the global part maybe later (:meth:`complete_pending`).
        """
        errors: list[Exception | None] = [None] * len(group)
        calls: list[tuple[str, tuple[str, _Part] | None, tuple[list[str], list[Any]]] | None] = []
        broken: set[str] = set()
        """Channels with an earlier bundle of this group that cannot be written: later ones are not sent."""
        previous: dict[str, str] = {}
        """Channel → the bundle of this group written to it last so far."""
        reservations: dict[int, tuple[_Part, _Part]] = {}
        """Bundle → the reservation of its channel's slot under a limit, and its release."""
        for i, writes in enumerate(group):
            plan = _Plan(self)
            try:
                if broken & _channels_of(writes):
                    raise StoreConflict(
                        f"an earlier write to channel {sorted(broken & _channels_of(writes))[0]} failed"
                    )
                plan.add(writes)
                call = None if plan.empty else plan.spread_calls(previous)
                if call is not None and call[1] is not None:
                    previous[call[1][0]] = call[0]
                calls.append(call)
                reservation = plan.reservation()
                if reservation is not None:
                    reservations[i] = reservation
            except (StoreConflict, ValueError) as exc:
                errors[i] = exc
                broken |= _channels_of(writes)
                calls.append(None)
        if reservations:
            await self._reserve(reservations, errors, calls)
        sent, deadline = self._deadline()
        channel_parts = [
            (i, call[1][1])
            for i, call in enumerate(calls)
            if call is not None and call[1] is not None and errors[i] is None
        ]
        if channel_parts:
            results = await self._run_scripts(  # no answer: every bundle not refused yet fails (some wrote)
                [(part.keys, [deadline, *part.args()]) for _, part in channel_parts],
                errors,
                [i for i, error in enumerate(errors) if error is None],
            )
            for (i, _), result in zip(channel_parts, results, strict=True):
                errors[i] = self._outcome(result)
            self._crash_between_parts(group, errors, calls)
            refused = [
                i for i, _ in channel_parts if i in reservations and isinstance(errors[i], (StoreConflict, StoreLate))
            ]
            if refused:  # nothing of them was written: free their slots (else the reservations lapse)
                await self._release([reservations[i][1] for i in refused])
        sent, deadline = self._deadline()
        global_parts = [(i, call) for i, call in enumerate(calls) if call is not None and errors[i] is None]
        done: list[tuple[bytes, bytes]] = []
        if global_parts:
            batch = [(keys, [deadline, *args]) for i, (_, _, (keys, args)) in global_parts]
            results = await self._run_scripts(batch, errors, [i for i, _ in global_parts])
            for (i, (bundle_id, part, _)), result in zip(global_parts, results, strict=True):
                errors[i] = self._outcome(result)
                if errors[i] is None and not isinstance(result, Exception):
                    self._learn_offset(int(result[1]) * 1_000_000 + int(result[2]), sent, time.monotonic())
                    if part is not None:
                        done.append((self._c(part[0], "outbox").encode(), bundle_id.encode()))
        if done:  # in the background: the callers need not wait for it
            task = asyncio.create_task(self._forget_outbox(done))
            self._forgetting.add(task)
            task.add_done_callback(self._forgetting.discard)
        if any(e is not None for e in errors):
            raise PartlyWritten(errors)

    async def _reserve(
        self,
        reservations: dict[int, tuple[_Part, _Part]],
        errors: list[Exception | None],
        calls: list[Any],
    ) -> None:
        """(spread) Reserve the slots of the bundles that open a channel under a limit, in one pipeline
        on the global slot, before their channel parts: a bundle whose holder is at its limit fails
        (:class:`LimitConflict`) having written nothing, and so does every later bundle of its channel."""
        order = sorted(reservations)
        _, deadline = self._deadline()
        pending = [i for i, error in enumerate(errors) if error is None]  # if Redis does not answer, none is sent
        results = await self._run_scripts(
            [(reservations[i][0].keys, [deadline, *reservations[i][0].args()]) for i in order], errors, pending
        )
        failed = {i for i, result in zip(order, results, strict=True) if self._outcome(result) is not None}
        for i, result in zip(order, results, strict=True):
            errors[i] = self._outcome(result)
        if failed:
            refused = {c[1][0] for i, c in enumerate(calls) if i in failed and c is not None and c[1] is not None}
            for i, call in enumerate(calls):
                if errors[i] is None and call is not None and call[1] is not None and call[1][0] in refused:
                    errors[i] = StoreConflict(f"an earlier write to channel {call[1][0]} failed")
            unknown = [reservations[i][1] for i in failed if not isinstance(errors[i], (StoreConflict, StoreLate))]
            if unknown:  # maybe written (Redis did not answer): release what may be held
                await self._release(unknown)

    async def _release(self, releases: Sequence[_Part]) -> None:
        """(spread) Free reserved slots whose channel part was not written (best effort: else they lapse)."""
        try:
            await self._run_scripts([(part.keys, [0, *part.args()]) for part in releases])
        except Exception as exc:
            log.info("could not release %d reserved slots (%r); they lapse by themselves", len(releases), exc)

    async def _run_scripts(
        self,
        calls: Sequence[tuple[list[str], list[Any]]],
        errors: list[Exception | None] | None = None,
        bundles: Sequence[int] = (),
    ) -> list[Any]:
        """Run commit script calls (KEYS, ARGV) in one pipeline; each result, or the exception of that call.

        If the pipeline as a whole fails (Redis did not answer) and ``errors`` is given, raise
        :class:`PartlyWritten` with that failure for the ``bundles`` (indexes into ``errors``) —
        some of their calls may have run; the others keep what ``errors`` says."""
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                for keys, args in calls:
                    pipe.execute_command("EVALSHA", self._commit_script.sha, len(keys), *keys, *args)
                results = await pipe.execute(raise_on_error=False)
        except Exception as exc:
            if errors is None:
                raise
            for i in bundles:
                errors[i] = exc
            raise PartlyWritten(errors) from exc
        if any(isinstance(r, redis.exceptions.NoScriptError) for r in results):
            await self._register_scripts()  # a node restarted or failed over: those calls wrote nothing
        return results

    @staticmethod
    def _outcome(result: Any) -> Exception | None:
        """The failure a commit script call's result means (None: written, or applied before)."""
        if isinstance(result, Exception):
            return result
        code = int(result[0])
        if code in (1, 3):
            return None
        if code == 2:
            return StoreLate(f"{_text(result[1])}: Redis stalled longer than the --redis-timeout")
        return _conflict(result)

    @staticmethod
    def _crash_between_parts(
        group: list[Writes], errors: list[Exception | None], calls: Sequence[object | None]
    ) -> None:
        """Test-only fault (:data:`CRASH_BETWEEN_PARTS_ENV`): die between a bundle's two parts."""
        key = os.environ.get(CRASH_BETWEEN_PARTS_ENV)
        if not key:
            return
        for writes, error, call in zip(group, errors, calls, strict=True):
            if call is not None and error is None and any(w.idempotency_key == key for w in writes.wal):
                log.error("%s=%s: exiting between the parts of a commit (test fault)", CRASH_BETWEEN_PARTS_ENV, key)
                os._exit(70)

    async def _forget_outbox(self, entries: Sequence[tuple[bytes, bytes]]) -> None:
        """Delete outbox entries whose global part is applied, then let their done marks lapse
        (best effort: a sweep finds leftovers done and deletes them).

        A done mark stays (score +inf) while its outbox entry exists; once the entry is deleted
        it gets the deletion time as score and the global script trims it some
        :data:`_DONE_KEEP` seconds later — long after any completer that read the entry before
        the deletion could still apply it (it reads again right before, and sends a deadline)."""
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                for key, bundle_id in entries:
                    pipe.hdel(key, bundle_id)
                deleted = await pipe.execute(raise_on_error=False)
            gone = [
                bundle_id for (_, bundle_id), d in zip(entries, deleted, strict=True) if not isinstance(d, Exception)
            ]
            if gone:
                redis_now = (time.monotonic() * 1_000_000 + self._offset_us) / 1_000_000
                await self._client.zadd(self._g + "outbox:done", dict.fromkeys(gone, redis_now), xx=True)
        except Exception as exc:  # best effort: what is left is found done and deleted by a sweep
            log.info("could not delete %d applied outbox entries (%r); a later sweep will", len(entries), exc)

    async def complete_pending(self, *, immediately: bool = False) -> int:
        """Apply the global part of every bundle left in a channel's outbox (spread layout): a
        writer that died, or whose global part failed, between the parts. Returns how many.

        Found by SCAN over every master (outbox keys exist only while they hold an entry). With
        ``immediately`` (at open) every entry is completed; otherwise only those a previous call
        found too, so a writer whose global part is on its way is not raced for nothing (racing it
        is harmless: a global part applies once, by the done set)."""
        pattern = "{" + _glob_escape(self._raw_prefix) + "c:*}:outbox"
        keys = [_bytes(k) async for k in self._client.scan_iter(match=pattern, count=1000)]
        if not keys:
            self._seen = set()
            return 0
        async with self._client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.hgetall(key)
            found = cast("list[dict[bytes, bytes]]", await pipe.execute())
        pending = {(key, bid): blob for key, entries in zip(keys, found, strict=True) for bid, blob in entries.items()}
        ripe = [entry for entry in pending if immediately or entry in self._seen]
        self._seen = set(pending) - set(ripe)
        completed = 0
        for key, bundle_id in ripe:
            # Read again right before applying (and apply with a deadline): an entry applied and
            # deleted meanwhile is skipped, so no completer applies one long after it was done.
            packed = await self._client.hget(key, bundle_id)
            if packed is None:
                continue
            call_keys, args = _unpack_call(_bytes(packed))
            _, deadline = self._deadline()
            result = cast("list[Any]", await self._commit_script(keys=call_keys, args=[deadline, *args]))
            failure = self._outcome(result)
            if failure is not None:
                log.error("could not complete bundle %s of %s: %s", _text(bundle_id), _text(key), failure)
                continue
            if int(result[0]) == 1:
                completed += 1
                log.warning(
                    "completed the global part (audit, indexes, change feed) of bundle %s of %s: its writer "
                    "stopped between the parts",
                    _text(bundle_id),
                    _text(key),
                )
            await self._forget_outbox([(key, bundle_id)])
        return completed

    async def _sweep_loop(self) -> None:
        """Every ``sweep_interval`` seconds, :meth:`complete_pending` (until :meth:`close`)."""
        while not self._sweep_stop.is_set():
            try:
                await asyncio.wait_for(self._sweep_stop.wait(), self._sweep_interval)
                return
            except TimeoutError:
                pass
            try:
                await self.complete_pending()
            except Exception as exc:  # the store does not answer: the next sweep tries again
                log.warning("could not look for bundles to complete (%r); retrying", exc)

    async def _measure_offset(self) -> None:
        """Measure Redis's clock against this host's monotonic clock with one TIME call."""
        sent = time.monotonic()
        seconds, micros = await self._client.time(**self._on_home_node())
        self._learn_offset(seconds * 1_000_000 + micros, sent, time.monotonic())

    def _learn_offset(self, redis_us: int, sent: float, answered: float) -> None:
        """Learn Redis's clock (its TIME, read between ``sent`` and ``answered`` on this host's
        monotonic clock) as an offset from this host's monotonic clock.

        The deadline a commit carries is in Redis's clock, so the hosts' clocks need not agree
        and a step of this host's wall clock changes nothing: only the measurement's error
        (half a quick round trip) and the drift since the last commit count. A slow answer (a
        stall) measures nothing and is not used; a commit refused as late measures again."""
        if answered - sent > min(0.1, self._timeout / 2):
            return
        self._offset_us = redis_us - (sent + answered) / 2 * 1_000_000

    def _retry_alone(self, exc: Exception) -> bool:
        """A conflict is one bundle's; a Redis that did not answer fails the whole group at once, and
        so does a group its replicas did not confirm (it is stored: writing it again would conflict)."""
        return not isinstance(exc, (*_UNREACHABLE, StoreUnconfirmed))

    # -- reads -------------------------------------------------------------------------

    @_read
    async def channel_seq(self, channel_id: str) -> int:
        """The channel's last committed seq (its ``last`` key)."""
        value = await self._client.get(self._c(channel_id, "last"))
        return 0 if value is None else int(value)

    @_read
    async def session_of(self, agent_id: str) -> str | None:
        """The session id holding the identity's Connect stream on some replica (None: none)."""
        value = await self._client.hget(self._g + "sessions", agent_id)
        return None if value is None else _text(value)

    @_read
    async def load_agents(self) -> list[AgentRow]:
        """Every identity."""
        rows = await self._client.hgetall(self._g + "agents")
        return [_agent(_text(agent_id), _bytes(packed)) for agent_id, packed in rows.items()]

    @_read
    async def get_agent(self, agent_id: str) -> AgentRow | None:
        """One identity (removed ones flagged)."""
        packed = await self._client.hget(self._g + "agents", agent_id)
        return None if packed is None else _agent(agent_id, _bytes(packed))

    @_read
    async def get_agent_named(self, name: str) -> AgentRow | None:
        """The live identity of a name (the live-name index)."""
        agent_id = await self._client.hget(self._g + "agent_names", name)
        if agent_id is None:
            return None
        packed = await self._client.hget(self._g + "agents", agent_id)
        return None if packed is None else _agent(_text(agent_id), _bytes(packed))

    @_read
    async def load_live_channels(self) -> list[ChannelRow]:
        """Channels not yet ended."""
        ids = sorted(_text(m) for m in await self._client.smembers(self._g + "channels:live"))
        return [row for row in await self._channels(ids) if row is not None and row.live]

    async def _channels(self, ids: Sequence[str]) -> list[ChannelRow | None]:
        async with self._client.pipeline(transaction=False) as pipe:
            for channel_id in ids:
                pipe.hmget(self._c(channel_id, "meta"), ["live", "record", "seed"])
            found = await pipe.execute()
        out: list[ChannelRow | None] = []
        for channel_id, (live, record, seed) in zip(ids, found, strict=True):
            out.append(None if record is None else ChannelRow(channel_id, live == b"1", bytes(record), bytes(seed)))
        return out

    @_read
    async def get_channel(self, channel_id: str) -> ChannelRow | None:
        """One channel."""
        return (await self._channels([channel_id]))[0]

    @_read
    async def list_channels_for(
        self, agent_id: str, *, include_ended: bool, limit: int, before: int = 0
    ) -> list[tuple[int, ChannelRow]]:
        """Channels of one member, newest first (by creation order, the zset's scores)."""
        key = self._g + "member_channels:" + agent_id
        out: list[tuple[int, ChannelRow]] = []
        top = f"({before}" if before else "+inf"
        start = 0
        while limit < 0 or len(out) < limit:
            found = cast(
                "list[tuple[bytes, float]]",
                await self._client.zrevrangebyscore(key, top, "-inf", start=start, num=_PAGE, withscores=True),
            )
            rows = await self._channels([_text(m) for m, _ in found])
            for (_, order), row in zip(found, rows, strict=True):
                if row is not None and (include_ended or row.live):
                    out.append((int(order), row))
            if len(found) < _PAGE:
                break
            start += _PAGE
        return out[:limit]

    @_read
    async def list_channels(self, *, live_only: bool, before: int, limit: int) -> list[tuple[int, ChannelRow]]:
        """Every channel, newest first (by creation order). Keeps no global index of ended channels:
        every call SCANs the channels' meta keys (an operator read, not a hot path)."""
        if self.spread:  # the creation order is a global index (written by each channel's first global part)
            ordered_all = cast(
                "list[tuple[bytes, float]]",
                await self._client.zrange(self._g + "channels:order", 0, -1, withscores=True),
            )
            live = {_text(m) for m in await self._client.smembers(self._g + "channels:live")} if live_only else None
            picked = sorted(
                (
                    (int(o), c)
                    for c, o in ((_text(m), score) for m, score in ordered_all)
                    if (live is None or c in live) and (not before or int(o) < before)
                ),
                reverse=True,
            )[:limit]
            spread_rows = await self._channels([c for _, c in picked])
            return [(o, row) for (o, _), row in zip(picked, spread_rows, strict=True) if row is not None]
        if live_only:
            ids = [_text(m) for m in await self._client.smembers(self._g + "channels:live")]
        else:
            ids = []
            head, tail = f"{self._p}{{c:", "}:meta"
            async for key in self._client.scan_iter(match=f"{_glob_escape(self._p)}{{c:*}}:meta", count=1000):
                name = _text(key)
                if name.startswith(head) and name.endswith(tail):
                    ids.append(name[len(head) : -len(tail)])
        if not ids:
            return []
        async with self._client.pipeline(transaction=False) as pipe:
            for channel_id in ids:
                pipe.hget(self._c(channel_id, "meta"), "order")
            orders = await pipe.execute()
        ordered = sorted(
            (
                (int(o), c)
                for o, c in zip(orders, ids, strict=True)
                if o is not None and (not before or int(o) < before)
            ),
            reverse=True,
        )[:limit]
        rows = await self._channels([c for _, c in ordered])
        return [(o, row) for (o, _), row in zip(ordered, rows, strict=True) if row is not None]

    def location(self) -> tuple[str, str]:
        """("redis", HOST:PORT/DB): :attr:`address`, without credentials."""
        return ("redis", self.address)

    @_read
    async def read_wal(self, channel_id: str, from_seq: int, until_seq: int, limit: int) -> list[bytes]:
        """A seq range of one channel."""
        entries = await self._client.xrange(
            self._c(channel_id, "wal"),
            min=f"{max(from_seq, 0)}-0",
            max=f"{until_seq}-0" if until_seq else "+",
            count=limit if limit > 0 else None,
        )
        return _datas(entries)

    async def scan_wal(
        self, channel_ids: Sequence[str], *, batch: int = 5000
    ) -> AsyncIterator[tuple[str, list[bytes]]]:
        """Stream whole WALs channel by channel, in seq order, ``batch`` envelopes a page (XRANGE pages).

        The first page of up to :data:`_WAL_CHANNELS` channels is read in one pipeline (on a
        Cluster, one batch per node), the further pages of a long WAL one call each."""
        ids = list(channel_ids)
        for low_index in range(0, len(ids), _WAL_CHANNELS):
            chunk = ids[low_index : low_index + _WAL_CHANNELS]
            firsts = await self._wal_first_pages([self._c(c, "wal") for c in chunk], batch)
            for channel_id, entries in zip(chunk, firsts, strict=True):
                key = self._c(channel_id, "wal")
                while entries:
                    yield channel_id, _datas(entries)
                    if len(entries) < batch:
                        break
                    entries = await self._wal_page(key, "(" + _text(entries[-1][0] or b""), batch)

    @_read
    async def _wal_first_pages(self, keys: Sequence[str], batch: int) -> list[Any]:
        async with self._client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.xrange(key, min="-", max="+", count=batch)
            return await pipe.execute()

    @_read
    async def _wal_page(self, key: str, low: str, batch: int) -> Any:
        return await self._client.xrange(key, min=low, max="+", count=batch)

    async def _envelope_at(self, channel_id: str, seq: int) -> bytes | None:
        entries = await self._client.xrange(self._c(channel_id, "wal"), min=f"{seq}-0", max=f"{seq}-0")
        datas = _datas(entries)
        return datas[0] if datas else None

    @_read
    async def find_envelope(self, envelope_id: str) -> bytes | None:
        """Envelope by id (the global index names its channel and seq)."""
        where = await self._client.hget(self._g + "envelopes", envelope_id)
        if where is None:
            return None
        channel_id, seq = _unpack(_bytes(where))
        return await self._envelope_at(channel_id.decode(), int(seq))

    @_read
    async def find_idempotent(self, channel_id: str, sender_id: str, key: str) -> bytes | None:
        """The envelope written under an idempotency key."""
        seq = await self._client.hget(self._c(channel_id, "idem"), _idem_field(sender_id, key))
        return None if seq is None else await self._envelope_at(channel_id, int(seq))

    @_read
    async def find_reply(self, channel_id: str, sender_id: str, causation_id: str) -> bytes | None:
        """The first envelope ``sender_id`` wrote to the channel answering ``causation_id`` (the replies hash)."""
        seq = await self._client.hget(self._c(channel_id, "replies"), _idem_field(sender_id, causation_id))
        return None if seq is None else await self._envelope_at(channel_id, int(seq))

    @_read
    async def search_text(self, channel_ids: Sequence[str], query: str, limit: int) -> list[bytes]:
        """ASCII-case-insensitive substring search over EV_TEXT bodies (an exact scan, chunked per call)."""
        return await self._texts(channel_ids, "q", query, limit)

    @_read
    async def texts_from(self, channel_ids: Sequence[str], sender_id: str, limit: int) -> list[bytes]:
        """Latest texts of one sender."""
        return await self._texts(channel_ids, "s", sender_id, limit)

    async def _texts(self, channel_ids: Sequence[str], mode: str, needle: str, limit: int) -> list[bytes]:
        """Newest matching EV_TEXT envelopes of the channels (by created_at, then seq), at most ``limit``."""
        if limit <= 0:
            return []
        hits: list[tuple[str, int, str]] = []  # (created_at, seq, channel_id)
        for channel_id in channel_ids:
            upper, found = "+", 0
            while found < limit:
                done, last, out = cast(
                    "list[Any]",
                    await self._scan_script(
                        keys=[self._c(channel_id, "texts")],
                        args=[upper, _TEXT_SCAN_CHUNK, mode, needle, limit - found],
                    ),
                )
                for j in range(0, len(out), 2):
                    hits.append((_text(out[j + 1]), int(_text(out[j]).split("-")[0]), channel_id))
                found += len(out) // 2
                if int(done) or not last:
                    break
                upper = "(" + _text(last)
        hits.sort(reverse=True)
        hits = hits[:limit]
        async with self._client.pipeline(transaction=False) as pipe:
            for _, seq, channel_id in hits:
                pipe.xrange(self._c(channel_id, "wal"), min=f"{seq}-0", max=f"{seq}-0")
            found_entries = await pipe.execute()
        return [bytes(entries[0][1][b"d"]) for entries in found_entries if entries]

    @_read
    async def load_cursors(self, agent_id: str) -> dict[str, int]:
        """Ack cursors of one agent."""
        rows = await self._client.hgetall(self._g + "cursors:" + agent_id)
        return {_text(k): int(v) for k, v in rows.items()}

    @_read
    async def load_tasks(self, *, live_only: bool) -> list[TaskRow]:
        """Tasks."""
        if live_only:
            ids = sorted(_text(m) for m in await self._client.smembers(self._g + "tasks:live"))
        else:
            ids = sorted(_text(m) for m in await self._client.hkeys(self._g + "tasks"))
        return [row for row in await self._tasks(ids) if row is not None]

    async def _tasks(self, ids: Sequence[str]) -> list[TaskRow | None]:
        if not ids:
            return []
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.hmget(self._g + "tasks", list(ids))
            pipe.hmget(self._g + "task_meta", list(ids))
            pipe.smismember(self._g + "tasks:live", list(ids))
            records, metas, live = await pipe.execute()
        out: list[TaskRow | None] = []
        for task_id, record, meta, is_live in zip(ids, records, metas, live, strict=True):
            if record is None or meta is None:
                out.append(None)
                continue
            owner, channel = _unpack(meta)
            out.append(TaskRow(task_id, owner.decode(), channel.decode(), not is_live, bytes(record)))
        return out

    @_read
    async def get_task(self, task_id: str) -> TaskRow | None:
        """One task."""
        return (await self._tasks([task_id]))[0]

    @_read
    async def get_checkpoint(self, task_id: str) -> CheckpointRow | None:
        """The task's last checkpoint."""
        packed = await self._client.hget(self._g + "checkpoints", task_id)
        if packed is None:
            return None
        owner, saved_at, state = (v.decode() for v in _unpack(_bytes(packed)))
        return CheckpointRow(task_id, owner, state, float(saved_at))

    @_read
    async def load_observed(self, agent_id: str) -> dict[str, ObservedCounts]:
        """The identity's counts per capability."""
        fields = await self._client.hgetall(self._g + "observed:" + agent_id)
        by_capability: dict[str, dict[str, str]] = {}
        for key, value in fields.items():
            capability, _, name = _text(key).rpartition("\0")
            by_capability.setdefault(capability, {})[name] = _text(value)
        return {
            capability: ObservedCounts(
                completed=int(v.get("completed", "0")),
                failed=int(v.get("failed", "0")),
                expired=int(v.get("expired", "0")),
                cancelled=int(v.get("cancelled", "0")),
                last_latency_ms=int(v.get("latency", "0")),
                last_updated=float(v.get("at", "0")),
            )
            for capability, v in by_capability.items()
        }

    @_read
    async def load_running_executions(self) -> list[ExecutionRow]:
        """Executions still marked running."""
        ids = sorted(_text(m) for m in await self._client.smembers(self._g + "exec:running"))
        if not ids:
            return []
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.hmget(self._g + "exec", ids)
            pipe.hmget(self._g + "exec:meta", ids)
            records, metas = await pipe.execute()
        out = []
        for execution_id, record, meta in zip(ids, records, metas, strict=True):
            if record is None or meta is None:
                continue
            out.append(_execution(execution_id, True, bytes(record), _bytes(meta)))
        return out

    @_read
    async def get_execution(self, execution_id: str) -> ExecutionRow | None:
        """One execution."""
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.hget(self._g + "exec", execution_id)
            pipe.hget(self._g + "exec:meta", execution_id)
            pipe.sismember(self._g + "exec:running", execution_id)
            record, meta, running = await pipe.execute()
        if record is None or meta is None:
            return None
        return _execution(execution_id, bool(running), bytes(record), _bytes(meta))

    @_read
    async def get_call_token(self, token_hash: str) -> CallTokenRow | None:
        """A call token of an execution that has not ended."""
        packed = await self._client.hget(self._g + "call_tokens", token_hash)
        if packed is None:
            return None
        execution_id, agent_id, expires_at = (v.decode() for v in _unpack(_bytes(packed)))
        return CallTokenRow(token_hash, execution_id, agent_id, float(expires_at))

    @_read
    async def list_executions(self, *, root_session_id: str, member_id: str, limit: int) -> list[bytes]:
        """Executions of one root session, or of every root session ``member_id`` took part in (all when "")."""
        count = limit if limit >= 0 else -1
        if root_session_id:
            roots = [self._g + "exec:root:" + root_session_id]
        elif not member_id:
            roots = [self._g + "exec:all"]
        else:
            members = await self._client.smembers(self._g + "exec:roots_of:" + member_id)
            roots = [self._g + "exec:root:" + _text(r) for r in members]
        ordered: list[tuple[float, str]] = []
        for key in roots:
            page = await self._client.zrangebyscore(key, "-inf", "+inf", start=0, num=count, withscores=True)
            ordered.extend((float(score), _text(member)) for member, score in cast("list[tuple[bytes, float]]", page))
        ordered.sort()  # (started_at, insertion number): SQLite's (started_at, rowid)
        if count >= 0:
            ordered = ordered[:count]
        ids = [member.partition(":")[2] for _, member in ordered]
        if not ids:
            return []
        records = await self._client.hmget(self._g + "exec", ids)
        return [_bytes(r) for r in records if r is not None]

    @_read
    async def root_session_members(self, root_session_id: str) -> set[str]:
        """Callers and targets of a root session's executions."""
        members = await self._client.zrange(self._g + "exec:root:" + root_session_id, 0, -1)
        ids = [_text(m).partition(":")[2] for m in cast("list[bytes]", members)]
        if not ids:
            return set()
        metas = await self._client.hmget(self._g + "exec:meta", ids)
        out: set[str] = set()
        for meta in metas:
            if meta is not None:
                _, caller, target, *_ = _unpack(_bytes(meta))
                out.update((caller.decode(), target.decode()))
        return out

    @_read
    async def list_audit(self, *, kind: str, subject_id: str, after_id: int, limit: int) -> list[AuditRow]:
        """Audit records in id order (paging the most selective index, filtering by the other field)."""
        if subject_id:
            key = self._g + "audit:subject:" + subject_id
        elif kind:
            key = self._g + "audit:kind:" + kind
        else:
            key = self._g + "audit:all"
        out: list[AuditRow] = []
        low = f"({after_id}"
        while limit < 0 or len(out) < limit:
            page = cast("list[bytes]", await self._client.zrangebyscore(key, low, "+inf", start=0, num=_PAGE))
            ids = [int(m) for m in page]
            if not ids:
                break
            records = await self._client.hmget(self._g + "audit", [str(i) for i in ids])
            for audit_id, packed in zip(ids, records, strict=True):
                if packed is None:
                    continue
                row = _audit(audit_id, _bytes(packed))
                if (not kind or row.kind == kind) and (not subject_id or row.subject_id == subject_id):
                    out.append(row)
            if len(ids) < _PAGE:
                break
            low = f"({ids[-1]}"
        return out if limit < 0 else out[:limit]


def _conflict(result: Sequence[Any]) -> StoreConflict:
    """The conflict a commit script reported ({0, reason} or, for a holder's limit, {4, reason, held})."""
    if int(result[0]) == 4:
        return LimitConflict(_text(result[1]), int(result[2]))
    return StoreConflict(_text(result[1]))


def _channels_of(writes: Writes) -> set[str]:
    """The channels a bundle writes (WAL rows or channel rows)."""
    return {w.channel_id for w in writes.wal} | {c.channel_id for c in writes.channels}


def _glob_escape(text: str) -> str:
    """``text`` matched literally in a Redis glob pattern (SCAN MATCH)."""
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


class _Part:
    """The keys and ops of one commit script call (one slot)."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self._index: dict[str, int] = {}
        self.checks: list[list[Any]] = []
        self.writes: list[Any] = []

    def k(self, key: str) -> int:
        """The 1-based KEYS index of ``key`` (added on first use)."""
        index = self._index.get(key)
        if index is None:
            self.keys.append(key)
            index = self._index[key] = len(self.keys)
        return index

    def args(self, tail: Sequence[Any] = ()) -> list[Any]:
        """ARGV after the deadline: the check count, the checks, the writes, then ``tail``."""
        return [len(self.checks), *(v for check in self.checks for v in check), *self.writes, *tail]


class _Plan:
    """The keys and ops of one commit: one script call (:attr:`whole`), or with the spread layout
    one call per channel part plus one for the global part (:meth:`spread_calls`)."""

    def __init__(self, store: RedisHubStore) -> None:
        self._store = store
        self._spread = store.spread
        self._global = _Part()
        self._parts: dict[str, _Part] = {}
        """Channel → its part (spread layout only)."""
        self._last: dict[str, int] = {}
        """Channel → the last seq this plan writes so far."""
        self._idem: set[tuple[str, str]] = set()
        self._names: dict[str, str] = {}
        self._task_ended: dict[str, bool] = {}
        """Task → whether the last row this plan writes for it so far is terminal."""
        self._running: dict[str, bool] = {}
        """Execution → whether the last row this plan writes for it so far is running."""
        self._tokens: dict[str, int] = {}
        """Call tokens of each execution this plan writes so far (the 'tokens' check counts them)."""
        self._holds: dict[str, dict[str, bool]] = {}
        """Holder set → member → whether the last row this plan writes for it so far is live."""
        self._reserve: tuple[str, int, str] | None = None
        """(spread) The holder set, limit and channel of a channel this bundle opens under a limit."""
        self.empty = True
        self._changed: dict[str, list[Any]] = {"a": [], "t": [], "x": [], "s": [], "u": []}
        """What the plan writes besides WAL rows, for the change feed: agent, task, execution and
        session-holder ids, cursors."""
        self._rows: dict[str, int] = {}
        """Channels whose row the plan writes (→ 0, the feed's "row only")."""

    @property
    def keys(self) -> list[str]:
        """KEYS of the single script call (layout without spread)."""
        return self._global.keys

    def _part(self, channel_id: str) -> _Part:
        """Where a channel's keys are written: its own part with the spread layout, else the one script."""
        if not self._spread:
            return self._global
        part = self._parts.get(channel_id)
        if part is None:
            part = self._parts[channel_id] = _Part()
        return part

    def _feed(self) -> list[Any]:
        """The write op appending the change feed's entry (last op of the global part)."""
        store, g = self._store, self._global
        fields = redis_feed.encode(store.feed.replica_id, self._rows | self._last, self._changed)
        return ["feed", g.k(store.feed.key), g.k(store.feed.counter), redis_feed.FEED_MAXLEN, len(fields) // 2, *fields]

    def args(self) -> list[Any]:
        """ARGV of the single script call: the check count, the checks, the writes, the feed entry."""
        return self._global.args(self._feed())

    def spread_calls(
        self, after: dict[str, str] | None = None
    ) -> tuple[str, tuple[str, _Part] | None, tuple[list[str], list[Any]]]:
        """With the spread layout: the bundle id, the channel part (channel id, part) if any, and the
        global part's (KEYS, ARGV after the deadline).

        A bundle with a channel part records its global part in the channel's outbox (hash
        ``outbox``, field = bundle id) in the channel part's own script, and its global part
        first checks that the bundle is not done yet and marks it done (zset ``outbox:done``), so
        whoever finds the outbox entry may apply it again (:meth:`RedisHubStore.complete_pending`).
        ``after`` maps a channel to the bundle written to it just before in the same group: this
        one's channel part then requires the channel's ``lastb`` key to name that bundle (it
        committed, and no other writer came in between); every channel part sets ``lastb``.
        """
        if len(self._parts) > 1:
            raise ValueError(
                f"a bundle writes {len(self._parts)} channels ({', '.join(sorted(self._parts))}); with "
                "spread=1 a bundle may write one channel (its parts could not commit together)"
            )
        bundle_id = uuid.uuid4().hex
        g, store = self._global, self._store
        if not self._parts:
            return bundle_id, None, (g.keys, g.args(self._feed()))
        if g.checks:
            raise ValueError("with spread=1 a bundle that writes a channel may not carry global checks")
        done = store._g + "outbox:done"
        g.checks.insert(0, ["once", g.k(done), bundle_id])
        g.writes += ["done", g.k(done), bundle_id, max(_DONE_KEEP, int(10 * store.timeout))]
        global_call = (g.keys, g.args(self._feed()))
        ((channel_id, part),) = self._parts.items()
        last_bundle = part.k(store._c(channel_id, "lastb"))
        if after and channel_id in after:
            part.checks.append(["after", last_bundle, after[channel_id], channel_id])
        part.writes += ["hset", part.k(store._c(channel_id, "outbox")), bundle_id, _pack_call(*global_call)]
        part.writes += ["set", last_bundle, bundle_id]
        return bundle_id, (channel_id, part), global_call

    def add(self, writes: Writes) -> None:
        """Add one bundle's ops (in the order SQLite writes them)."""
        s, g, gp = self._store, self._store._g, self._global
        for a in writes.agents:
            if not a.removed:
                owner = self._names.setdefault(a.name, a.agent_id)
                if owner != a.agent_id:
                    raise StoreConflict(f"agent name {a.name} is claimed twice in one group")
                gp.checks.append(["name", gp.k(g + "agent_names"), a.name, a.agent_id])
            gp.writes += ["agent", gp.k(g + "agents"), gp.k(g + "agent_names"), gp.k(g + "agent_name_of"),
                          a.agent_id, _pack(a.name, a.cred_hash, "1" if a.removed else "0", a.record), a.name,
                          "1" if a.removed else "0"]  # fmt: skip
        changed = self._changed
        changed["a"] += [a.agent_id for a in writes.agents]
        changed["t"] += [t.task_id for t in writes.tasks]
        changed["x"] += [e.execution_id for e in writes.executions]
        changed["u"] += writes.cursors
        for agent_id, session_id, connected in writes.sessions:
            changed["s"].append(agent_id)
            gp.writes += ["hset" if connected else "hdelif", gp.k(g + "sessions"), agent_id, session_id]
        for c in writes.channels:
            self._rows.setdefault(c.channel_id, 0)
            members = c.member_ids()
            live = "1" if c.live else "0"
            holder = s.holder_key("channels", members[0])  # the initiator's live channels
            if c.hold_limit is not None and c.live:
                if self._spread:  # the channel part commits first: the slot is reserved before it
                    self._reserve = (holder, c.hold_limit, c.channel_id)
                else:
                    self._hold_check(holder, g + "channels:live", c.hold_limit, c.channel_id, "max_open_channels")
            self._hold(holder, c.channel_id, c.live)
            if self._spread:
                cp = self._part(c.channel_id)
                cp.writes += ["chmeta", cp.k(s._c(c.channel_id, "meta")), cp.k(s._c(c.channel_id, "members")),
                              live, c.record, c.seed, len(members), *members]  # fmt: skip
                gp.writes += ["chglobal", gp.k(g + "channels:order"), gp.k(g + "channel_order"),
                              gp.k(g + "channels:live"), c.channel_id, live, len(members),
                              *(gp.k(g + "member_channels:" + m) for m in members)]  # fmt: skip
                continue
            gp.writes += ["channel", gp.k(s._c(c.channel_id, "meta")), gp.k(g + "channel_order"),
                          gp.k(g + "channels:live"), gp.k(s._c(c.channel_id, "members")), c.channel_id,
                          live, c.record, c.seed, len(members),
                          *(gp.k(g + "member_channels:" + m) for m in members), *members]  # fmt: skip
        for w in writes.wal:
            self._wal(w)
        for agent_id, channel_id, seq in writes.cursors:
            gp.writes += ["cursor", gp.k(g + "cursors:" + agent_id), channel_id, seq]
        for t in writes.tasks:
            holder = s.holder_key("tasks", t.owner_id)  # the owner's running tasks
            if t.expect == TASK_IF_LIVE:
                if not t.terminal:
                    raise ValueError(f"task {t.task_id}: only an ending row may be written 'if live'")
                self._task_ended[t.task_id] = True
                self._holds.setdefault(holder, {})[t.task_id] = False
                gp.writes += ["endtask", gp.k(g + "tasks"), gp.k(g + "tasks:live"), gp.k(holder), t.task_id, t.record]
                continue
            self._task_check(t)
            if t.hold_limit is not None and not t.terminal:
                self._hold_check(holder, g + "tasks:live", t.hold_limit, t.task_id, "max_running_tasks")
            self._hold(holder, t.task_id, not t.terminal)
            gp.writes += ["hset", gp.k(g + "tasks"), t.task_id, t.record]
            gp.writes += ["hsetnx", gp.k(g + "task_meta"), t.task_id, _pack(t.owner_id, t.channel_id)]
            gp.writes += ["srem" if t.terminal else "sadd", gp.k(g + "tasks:live"), t.task_id]
        for ck in writes.checkpoints:  # one hash field per task: the last checkpoint written wins
            gp.writes += [
                "hset",
                gp.k(g + "checkpoints"),
                ck.task_id,
                _pack(ck.owner_id, repr(ck.saved_at), ck.state_json),
            ]
        for ob in writes.observations:  # HINCRBY in the script: an increment, atomic with the task's end
            gp.writes += ["observe", gp.k(g + "observed:" + ob.agent_id), ob.capability, ob.outcome]
            gp.writes += [ob.latency_ms, repr(ob.at)]
        for e in writes.executions:
            if e.expect_running:
                self._running_check(e.execution_id)
            self._running[e.execution_id] = e.running
            gp.writes += ["exec", gp.k(g + "exec"), gp.k(g + "exec:meta"), gp.k(g + "exec:counter"),
                          gp.k(g + "exec:all"), gp.k(g + "exec:root:" + e.root_session_id),
                          gp.k(g + "exec:roots_of:" + e.caller_id), gp.k(g + "exec:roots_of:" + e.target_id),
                          gp.k(g + "exec:running"), e.execution_id, e.record,
                          _pack(e.root_session_id, e.caller_id, e.target_id, repr(e.started_at), e.owner),
                          "1" if e.running else "0", repr(e.started_at), e.root_session_id]  # fmt: skip
            if not e.running:
                gp.writes += ["untoken", gp.k(g + "call_tokens"), gp.k(g + "call_tokens:" + e.execution_id)]
        for ct in writes.call_tokens:
            self._running_check(ct.execution_id)
            hashes, held = gp.k(g + "call_tokens"), gp.k(g + "call_tokens:" + ct.execution_id)
            earlier = self._tokens.get(ct.execution_id, 0)
            if ct.hold_limit is not None:  # hubsvc/storage/call_token_room.py
                gp.checks.append(["tokens", hashes, held, ct.hold_limit, repr(ct.issued_at), ct.execution_id, earlier])
                gp.writes += ["tokroom", hashes, held, ct.hold_limit, repr(ct.issued_at), repr(ct.grace)]
            self._tokens[ct.execution_id] = earlier + 1
            gp.writes += ["hset", hashes, ct.token_hash, _pack(ct.execution_id, ct.agent_id, repr(ct.expires_at))]
            gp.writes += ["sadd", held, ct.token_hash]
        for kind, actor_id, subject_id, detail_json, created_at in writes.audit:
            gp.writes += ["audit", gp.k(g + "audit_seq"), gp.k(g + "audit"), gp.k(g + "audit:all"),
                          gp.k(g + "audit:kind:" + kind), gp.k(g + "audit:subject:" + subject_id),
                          _pack(kind, actor_id, subject_id, detail_json, repr(created_at))]  # fmt: skip
        self.empty = self.empty and not writes

    def _hold_check(
        self, holder: str, live: str, limit: int, member: str, what: str, part: _Part | None = None
    ) -> None:
        """Require that ``holder`` (a holder set) holds fewer than ``limit`` live members, or ``member``,
        counting what this plan wrote to it before (a 'hold' check op, in ``part``: the global one)."""
        gp = part or self._global
        earlier = {} if part is not None else self._holds.get(holder, {})
        pairs = [v for m, on in earlier.items() for v in (m, "1" if on else "0")]
        gp.checks.append(["hold", gp.k(holder), gp.k(live), gp.k(self._store._g + RESERVED), limit, member,
                          f"{what} of {holder.rsplit(':', 1)[-1]}", len(earlier), *pairs])  # fmt: skip

    def reservation(self) -> tuple[_Part, _Part] | None:
        """(spread) For a bundle that opens a channel under a limit: the call reserving the slot on
        the global slot before the channel part (the 'hold' check, then the member added to the
        holder set and reserved for :data:`_RESERVE_KEEP` seconds), and the call releasing it if the
        channel part is refused. None for any other bundle."""
        if self._reserve is None:
            return None
        holder, limit, member = self._reserve
        g, store = self._store._g, self._store
        reserve, release = _Part(), _Part()
        self._hold_check(holder, g + "channels:live", limit, member, "max_open_channels", reserve)
        reserve.writes += ["sadd", reserve.k(holder), member]
        reserve.writes += ["reserve", reserve.k(g + RESERVED), member, max(_RESERVE_KEEP, int(10 * store.timeout))]
        release.writes += [
            "unreserve",
            release.k(holder),
            release.k(g + "channels:live"),
            release.k(g + RESERVED),
            member,
        ]
        return reserve, release

    def _hold(self, holder: str, member: str, live: bool) -> None:
        """Keep ``holder`` (the set of live channels an initiator holds, or running tasks an owner
        holds) up to date with a row written: add a live member, remove an ended one."""
        gp = self._global
        self._holds.setdefault(holder, {})[member] = live
        gp.writes += ["sadd" if live else "srem", gp.k(holder), member]

    def _running_check(self, execution_id: str) -> None:
        """Require the execution to be running: by an earlier row of this plan, else a check op."""
        running = self._running.get(execution_id)
        if running is None:
            gp = self._global
            gp.checks.append(["running", gp.k(self._store._g + "exec:running"), execution_id])
        elif not running:
            raise StoreConflict(f"execution {execution_id} ended earlier in this group")

    def _task_check(self, t: TaskRow) -> None:
        """Check ``t.expect`` against an earlier row of this plan, or add a check op against the store."""
        ended = self._task_ended.get(t.task_id)
        self._task_ended[t.task_id] = t.terminal
        if not t.expect:
            return
        if ended is None:
            g, gp = self._store._g, self._global
            gp.checks.append(["task", gp.k(g + "tasks"), gp.k(g + "tasks:live"), t.task_id, t.expect])
        elif t.expect == TASK_NEW or (t.expect == TASK_LIVE and ended):
            raise StoreConflict(f"task {t.task_id} was already written {'ended' if ended else 'running'} in this group")

    def _wal(self, w: WalRow) -> None:
        s, g, gp = self._store, self._store._g, self._global
        cp = self._part(w.channel_id)
        if w.seq < 1:
            raise StoreConflict(f"seq {w.seq} of channel {w.channel_id} is not positive")
        last_key = s._c(w.channel_id, "last")
        previous = self._last.get(w.channel_id)
        if previous is None:
            cp.checks.append(["seq", cp.k(last_key), w.seq - 1, w.channel_id])
        elif w.seq != previous + 1:
            raise StoreConflict(f"channel {w.channel_id}: seq {w.seq} does not follow {previous}")
        self._last[w.channel_id] = w.seq
        entry_id = f"{w.seq}-0"
        cp.writes += ["xadd", cp.k(s._c(w.channel_id, "wal")), entry_id, 1, "d", w.data]
        if w.text is not None:
            cp.writes += ["xadd", cp.k(s._c(w.channel_id, "texts")), entry_id, 3, "s", w.sender_id,
                          "c", w.created_at, "x", w.text]  # fmt: skip
        if w.idempotency_key is not None:
            field = _idem_field(w.sender_id, w.idempotency_key)
            if (w.channel_id, field) in self._idem:
                raise StoreConflict(f"idempotency key written twice in channel {w.channel_id}")
            self._idem.add((w.channel_id, field))
            idem = cp.k(s._c(w.channel_id, "idem"))
            cp.checks.append(["idem", idem, field, w.channel_id])
            cp.writes += ["hset", idem, field, w.seq]
        if w.causation_id is not None:  # the first reply stays: a later one answering the same envelope is not it
            replies = cp.k(s._c(w.channel_id, "replies"))
            cp.writes += ["hsetnx", replies, _idem_field(w.sender_id, w.causation_id), w.seq]
        gp.writes += ["hset", gp.k(g + "envelopes"), w.envelope_id, _pack(w.channel_id, str(w.seq))]
        cp.writes += ["set", cp.k(last_key), w.seq]


def _pack_call(keys: Sequence[str], args: Sequence[Any]) -> bytes:
    """One script call (KEYS, ARGV after the deadline) as bytes, for a channel's outbox."""
    return _pack(str(len(keys)), *keys, *(a if isinstance(a, (str, bytes)) else str(a) for a in args))


def _unpack_call(packed: bytes) -> tuple[list[str], list[bytes]]:
    """The (KEYS, ARGV) :func:`_pack_call` packed."""
    parts = _unpack(packed)
    n = int(parts[0])
    return [p.decode() for p in parts[1 : 1 + n]], parts[1 + n :]


def _connection_kwargs(client: RedisClient) -> dict[str, Any]:
    """The connection settings a client was built with."""
    if isinstance(client, RedisCluster):
        return dict(client.get_connection_kwargs())
    return dict(client.connection_pool.connection_kwargs)


def _idem_field(sender_id: str, key: str) -> str:
    return f"{sender_id}\0{key}"


def _pack(*parts: str | bytes) -> bytes:
    """Length-prefixed concatenation (4-byte big-endian length before each part)."""
    out = bytearray()
    for part in parts:
        raw = part.encode() if isinstance(part, str) else part
        out += struct.pack(">I", len(raw)) + raw
    return bytes(out)


def _unpack(packed: bytes) -> list[bytes]:
    """The parts :func:`_pack` joined."""
    parts: list[bytes] = []
    at = 0
    while at < len(packed):
        (size,) = struct.unpack_from(">I", packed, at)
        parts.append(packed[at + 4 : at + 4 + size])
        at += 4 + size
    return parts


def _agent(agent_id: str, packed: bytes) -> AgentRow:
    name, cred_hash, removed, record = _unpack(packed)
    return AgentRow(agent_id, name.decode(), cred_hash.decode(), record, removed == b"1")


def _execution(execution_id: str, running: bool, record: bytes, meta: bytes) -> ExecutionRow:
    """An execution row from its record and packed meta (root, caller, target, started, owner —
    rows written before owners were recorded have no owner)."""
    root, caller, target, started, *owner = (v.decode() for v in _unpack(meta))
    return ExecutionRow(execution_id, root, caller, target, running, float(started), record, owner[0] if owner else "")


def _audit(audit_id: int, packed: bytes) -> AuditRow:
    kind, actor_id, subject_id, detail_json, created_at = (v.decode() for v in _unpack(packed))
    return AuditRow(audit_id, kind, actor_id, subject_id, detail_json, float(created_at))


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _bytes(value: object) -> bytes:
    """A reply value as bytes (the client is built without decode_responses)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"unexpected Redis reply {type(value).__name__}")


def _datas(entries: object) -> list[bytes]:
    """The ``d`` (envelope) field of each entry of an XRANGE reply."""
    return [_bytes(fields[b"d"]) for _, fields in cast("list[tuple[bytes, dict[bytes, bytes]]]", entries or [])]
