import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { crc32 } from "node:zlib";
import { after, before, test } from "node:test";
import { credentials, Metadata } from "@grpc/grpc-js";
import { AgentNetError, Client, type InboundEnvelope, Reason, register } from "../src";
import { type GetStatusResponse, OperatorServiceClient } from "../src/gen";
import { TcpForwarder } from "../testkit/forwarder";
import { type DirectHub, pythonPath, repoRoot, startDirectHub } from "../testkit/hub";
import { type RedisProcess, startRedis } from "../testkit/redis";
import { waitFor } from "../testkit/wait";

// Session steering (docs/scale-out.md): two hub replicas on one redis-server divide the
// channels into 8 partitions; a member connected through the replica that does not hold
// its channel is moved by a Redirect to the holder. Clients dial the replicas directly:
// a Redirect names a replica's own address.

const PARTITIONS = 8;
let redis: RedisProcess;
const hubs: DirectHub[] = [];
const clients: Client[] = [];
const operators: OperatorServiceClient[] = [];
const forwarders: TcpForwarder[] = [];

before(async () => {
  redis = await startRedis();
});

after(async () => {
  await Promise.all(clients.map((c) => c.close()));
  for (const op of operators) op.close();
  await Promise.all(hubs.map((h) => h.stop()));
  await Promise.all(forwarders.map((f) => f.close()));
  await redis.stop();
});

/** A replica of a store whose channels are divided, with its operator API. */
interface Replica {
  hub: DirectHub;
  status(): Promise<GetStatusResponse>;
}

/**
 * Start a replica dividing the channels. Ownership rounds every 0.2 s make a joining
 * replica settle quickly (a holder releases what the newcomer should own at its next
 * round, whatever the lease time); leases of 5 s keep a replica the loaded machine starves
 * of CPU for a moment from losing its partitions, which would move the channels these
 * tests place. A stream is considered for steering every second instead of every 10.
 */
async function startReplica(store: string, ...args: string[]): Promise<Replica> {
  const hub = await startDirectHub(["--store", store, "--partitions", String(PARTITIONS), "--replica-ttl", "5", "--replica-refresh", "0.2", "--steer-interval", "1", ...args]);
  hubs.push(hub);
  const token = readFileSync(join(hub.dir, "hub-operator.token"), "utf8").trim();
  const op = new OperatorServiceClient(hub.target, credentials.createInsecure());
  operators.push(op);
  const status = (): Promise<GetStatusResponse> =>
    new Promise((resolve, reject) => {
      const md = new Metadata();
      md.set("authorization", `Bearer ${token}`);
      op.getStatus({}, md, (err, res) => (err === null ? resolve(res) : reject(err)));
    });
  return { hub, status };
}

/** Poll the async `condition` until it holds (or throw after `timeoutMs`). */
async function eventually(condition: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * Wait until each replica holds exactly its share of the partitions (the rendezvous
 * assignment every replica computes, hubsvc.core.partition_map.assign) and both see every
 * holder so; returns the one holding partitions (a channel opened through it is held
 * there) and the other.
 */
async function settle(a: Replica, b: Replica): Promise<[Replica, Replica]> {
  const ids = [(await a.status()).replicaId, (await b.status()).replicaId];
  const script =
    "import json, sys; from hubsvc.core.partition_map import assign; print(json.dumps(assign(int(sys.argv[1]), sys.argv[2:])))";
  const want = JSON.parse(execFileSync(pythonPath(), ["-c", script, String(PARTITIONS), ...ids], { cwd: repoRoot(), encoding: "utf8" })) as Record<
    string,
    string
  >;
  await eventually(async () => {
    for (const r of [a, b]) {
      const st = await r.status();
      const held = [...Array(PARTITIONS).keys()].filter((p) => want[String(p)] === st.replicaId);
      const parts = st.partitions;
      if (parts === undefined || JSON.stringify(parts.held) !== JSON.stringify(held) || parts.owners.length !== PARTITIONS) return false;
      if (!parts.owners.every((o) => want[String(o.partition)] === o.replicaId && o.address !== "")) return false;
    }
    return true;
  }, "the replicas to settle their partitions");
  return ((await a.status()).partitions?.held.length ?? 0) > 0 ? [a, b] : [b, a];
}

/** The address of the replica holding `channelId`, as `r` sees it. */
async function holderAddress(r: Replica, channelId: string): Promise<string> {
  const partition = crc32(Buffer.from(channelId, "utf8")) % PARTITIONS;
  const owner = (await r.status()).partitions?.owners.find((o) => o.partition === partition);
  assert.ok(owner !== undefined, `no replica holds partition ${partition}`);
  return owner.address;
}

/** Alice's texts in `channelId` as `member` receives them (acking each), in arrival order. */
function collect(member: Client, channelId: string, from: string): string[] {
  const texts: string[] = [];
  void (async () => {
    for await (const env of member.envelopes() as AsyncIterable<InboundEnvelope>) {
      if (env.channelId === channelId && env.senderId === from && env.text !== undefined) texts.push(env.text);
      env.ack();
    }
  })().catch(() => undefined);
  return texts;
}

test("a member moves to the replica holding its channel and gets every text once, in order; one ignoring redirects stays", async () => {
  const store = redis.url(5);
  const [holding, other] = await settle(await startReplica(store), await startReplica(store));
  const fast = { reconnect: { initialDelayMs: 50, maxDelayMs: 300 } };
  const alice = await register(holding.hub.target, { name: "ts-steer-alice" });
  const bob = await register(other.hub.target, { name: "ts-steer-bob" });
  const carol = await register(other.hub.target, { name: "ts-steer-carol" });
  clients.push(alice, bob, carol);
  // Bob joins his conversation on a stream that stays where it connected; he follows
  // redirects on the stream he opens later, while texts flow.
  await bob.connect({ ...fast, followRedirects: false });
  await carol.connect({ ...fast, followRedirects: false });

  const open = async (member: Client): Promise<string> => {
    let channelId = "";
    await eventually(async () => {
      try {
        // known at the holder once its change feed caught up with the registration
        channelId = (await alice.openChannel({ type: "conversation", targets: [member.agentId], waitUntilOpened: true })).channel.channelId;
        return true;
      } catch (err) {
        if (AgentNetError.is(err, Reason.NOT_FOUND)) return false;
        throw err;
      }
    }, `a conversation with ${member.name}`);
    assert.equal(await holderAddress(other, channelId), holding.hub.target, "held where it was opened");
    return channelId;
  };
  const withBob = await open(bob);
  const withCarol = await open(carol);
  const toBob = collect(bob, withBob, alice.agentId);
  const toCarol = collect(carol, withCarol, alice.agentId);
  await bob.disconnect();
  assert.equal(bob.redirectedTo, undefined);

  // Alice posts into both conversations, without pause and without retrying: half of her
  // texts to bob while he is away (he gets them replayed), the rest once he caught up on the
  // stream he opens again through the other replica, where they draw the Redirect (replays
  // do not) and are under way while he moves; she keeps posting until his stream moved and
  // ten more followed, then an end marker. Bob posts into his conversation meanwhile. The
  // bridge must carry every post across the move itself.
  const TEXTS = 40;
  const sent = (prefix: string, n = TEXTS): string[] => [...Array(n).keys()].map((i) => `${prefix} ${i}`);
  const poster = async (client: Client, channelId: string, prefix: string): Promise<void> => {
    for (let i = 0; i < TEXTS; i++) await client.postText(channelId, `${prefix} ${i}`);
  };
  const toCarolPosted = poster(alice, withCarol, "to carol");
  for (const text of sent("to bob", TEXTS / 2)) await alice.postText(withBob, text);
  await bob.connect(fast);
  const fromBobPosted = poster(bob, withBob, "from bob");
  await waitFor(() => toBob.length >= TEXTS / 2, "alice's first texts replayed to bob", 30_000);
  let n = TEXTS / 2;
  for (let end = -1; end < 0 || n < end; n++) {
    await alice.postText(withBob, `to bob ${n}`);
    if (end < 0 && bob.redirectedTo !== undefined) end = Math.max(n + 10, TEXTS);
  }
  await alice.postText(withBob, "to bob end");
  await Promise.all([toCarolPosted, fromBobPosted]);

  await waitFor(() => toBob.at(-1) === "to bob end" && toCarol.length >= TEXTS, "every text to arrive", 30_000);
  assert.deepEqual(toBob, [...sent("to bob", n), "to bob end"], "bob got every text once, in order");
  assert.deepEqual(toCarol, sent("to carol"), "carol got every text once, in order");
  await waitFor(() => bob.redirectedTo === holding.hub.target && bob.connectionState === "connected", "bob's stream on the holder");
  assert.equal(carol.redirectedTo, undefined, "carol ignores redirects");
  // Bob's own posts landed once each, in his order.
  const fromBob = (await alice.readWal(withBob)).filter((e) => e.senderId === bob.agentId && e.text !== undefined).map((e) => e.text);
  assert.deepEqual(fromBob, sent("from bob"));
  // On the holder now, bob gets new texts there.
  await alice.postText(withBob, "on the holder now");
  await waitFor(() => toBob.at(-1) === "on the holder now", "the text after the move");
  assert.equal(toBob.length, n + 2);
});

/** The number of Redirects `client`'s stream followed. */
function redirects(client: Client): number {
  return (client as unknown as { stream: { redirects: number } }).stream.redirects;
}

test("a moved stream whose replica goes away goes back; a Redirect that leads nowhere pauses following them; nothing is lost", async () => {
  const store = redis.url(6);
  // Each replica advertises a forwarder's address, so the test can make the holder
  // unreachable at the address Redirects name while it keeps its leases (and commits
  // what alice posts to it directly).
  const behind = async (): Promise<[Replica, TcpForwarder]> => {
    const forwarder = await TcpForwarder.listen();
    forwarders.push(forwarder);
    const replica = await startReplica(store, "--advertise", forwarder.target);
    forwarder.pointTo(replica.hub.target);
    return [replica, forwarder];
  };
  const [a, fa] = await behind();
  const [b, fb] = await behind();
  const [holding, other] = await settle(a, b);
  const named = holding === a ? fa : fb;
  const alice = await register(holding.hub.target, { name: "ts-nowhere-alice" });
  const bob = await register(other.hub.target, { name: "ts-nowhere-bob" });
  clients.push(alice, bob);
  await bob.connect({ reconnect: { initialDelayMs: 50, maxDelayMs: 300 } });
  let channelId = "";
  await eventually(async () => {
    try {
      channelId = (await alice.openChannel({ type: "conversation", targets: [bob.agentId], waitUntilOpened: true })).channel.channelId;
      return true;
    } catch (err) {
      if (AgentNetError.is(err, Reason.NOT_FOUND)) return false;
      throw err;
    }
  }, "a conversation with bob");
  const toBob = collect(bob, channelId, alice.agentId);
  await waitFor(() => bob.redirectedTo === named.target && bob.connectionState === "connected", "bob's stream on the holder");

  // The holder becomes unreachable at its address: bob's stream there breaks and goes
  // back to the target given; the next Redirect (his new stream there gets alice's texts
  // from the holder) leads nowhere.
  named.pointTo(undefined);
  named.dropConnections();
  // Alice keeps posting until bob followed that Redirect and came back, then for 1.5 s
  // more: over one --steer-interval, in which his stream is sent Redirects he must not follow.
  const sent: string[] = [];
  const deadline = Date.now() + 45_000;
  let after = Infinity;
  while (Date.now() < after) {
    assert.ok(Date.now() < deadline, "timed out waiting for bob to follow a Redirect that leads nowhere");
    const text = `text ${sent.length}`;
    await alice.postText(channelId, text);
    sent.push(text);
    if (after === Infinity && redirects(bob) >= 2 && bob.redirectedTo === undefined) after = Date.now() + 1500;
  }
  await waitFor(() => toBob.length >= sent.length, "every text to arrive", 30_000);
  assert.deepEqual(toBob, sent, "bob got every text once, in order");
  await waitFor(() => bob.redirectedTo === undefined && bob.connectionState === "connected", "bob's stream back on the target given");
  // The first move and the one that led nowhere; the Redirects his streams on the target
  // given got since were not followed (REDIRECT_PAUSE_MS).
  assert.equal(redirects(bob), 2);
});
