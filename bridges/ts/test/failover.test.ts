import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { AgentNetError, Client, type InboundEnvelope, Reason, register } from "../src";
import { channelTarget } from "../src/targets";
import { TcpForwarder } from "../testkit/forwarder";
import { type HubProcess, startHub } from "../testkit/hub";
import { type RedisProcess, startRedis } from "../testkit/redis";
import { waitFor } from "../testkit/wait";

let redis: RedisProcess;
const hubs: HubProcess[] = [];
const forwarders: TcpForwarder[] = [];
const clients: Client[] = [];

before(async () => {
  redis = await startRedis();
});

after(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await Promise.all(hubs.map((h) => h.stop()));
  await Promise.all(forwarders.map((f) => f.close()));
  await redis.stop();
});

/** Fast channel-level reconnects, so the test does not wait out grpc-js's growing delay. */
const fastChannel = { "grpc.initial_reconnect_backoff_ms": 50, "grpc.max_reconnect_backoff_ms": 500 };

test("a client given two replicas moves to the standby when its hub is killed, losing and repeating nothing", async () => {
  const store = redis.url(3);
  const a = await startHub(["--store", store]);
  hubs.push(a);
  const standby = await TcpForwarder.listen(); // replica B's address: refuses until B starts
  forwarders.push(standby);
  const options = { targets: [standby.target], channelOptions: fastChannel };
  const alice = await register(a.target, { name: "ts-fo-alice" }, undefined, options);
  const bob = await register(a.target, { name: "ts-fo-bob" }, undefined, options);
  clients.push(alice, bob);
  await bob.connect({ reconnect: { initialDelayMs: 50, maxDelayMs: 300 } });
  const opened = await alice.openChannel({ type: "conversation", targets: [bob.agentId], waitUntilOpened: true });
  const channelId = opened.channel.channelId;

  // bob's handler records alice's texts and acks them, except that once armed it keeps
  // the next three unacked across the failover: the standby replays them (bob's cursor
  // stops below them), and the bridge must not hand them out again.
  const seen: InboundEnvelope[] = [];
  const held: InboundEnvelope[] = [];
  let arm = false;
  const handler = (async () => {
    for await (const env of bob.envelopes()) {
      const text = env.channelId === channelId && env.senderId === alice.agentId && env.text !== undefined;
      if (text) seen.push(env);
      if (text && arm && held.length < 3) held.push(env);
      else env.ack();
    }
  })();
  handler.catch(() => undefined);

  // alice posts without pause; a failed post is retried with the same idempotency key
  const acked: string[] = [];
  let stop = false;
  const poster = (async () => {
    for (let i = 0; !stop; i++) {
      for (;;) {
        if (stop) return;
        try {
          const env = await alice.postText(channelId, `post ${i}`, { idempotencyKey: `post-${i}` });
          acked.push(env.envelopeId);
          break;
        } catch {
          await new Promise((resolve) => setTimeout(resolve, 20)); // no replica up: try again
        }
      }
    }
  })();

  await waitFor(() => acked.length >= 5, "alice's first posts acknowledged", 20_000);
  arm = true;
  await waitFor(() => held.length === 3, "bob to hold three envelopes unacked", 20_000);
  await a.kill();
  await waitFor(() => bob.connectionState !== "connected", "bob to notice his hub died", 20_000);
  const beforeB = acked.length;
  const b = await startHub(["--store", store]);
  hubs.push(b);
  standby.pointTo(b.target);
  await waitFor(() => bob.connectionState === "connected", "bob to reconnect to the standby", 30_000);
  await waitFor(() => acked.length >= beforeB + 5, "alice's posts acknowledged by the standby", 30_000);
  stop = true;
  await poster;
  await bob.postText(channelId, "bob after failover");

  const want = [...acked];
  await waitFor(() => seen.length >= want.length, `bob's handler to see all ${want.length} acknowledged posts`, 30_000);
  const ids = seen.map((e) => e.envelopeId);
  assert.equal(new Set(ids).size, ids.length, "no envelope was handed to bob twice");
  for (let i = 1; i < seen.length; i++) {
    assert.ok((seen[i]?.seq ?? 0) > (seen[i - 1]?.seq ?? 0), `seq ${seen[i]?.seq} after ${seen[i - 1]?.seq}`);
  }
  assert.deepEqual([...ids].sort(), [...want].sort(), "bob's handler saw exactly the acknowledged posts");
  for (const env of held) env.ack(); // processed at last: bob's cursor moves past them
  const last = seen[seen.length - 1]?.seq ?? 0;
  await waitFor(() => (bob.cursors()[channelId] ?? 0) >= last, "bob's cursor to pass every text", 20_000);
});

test("a client whose first address is dead connects through the next", async () => {
  const live = await startHub();
  hubs.push(live);
  const dead = await TcpForwarder.listen();
  forwarders.push(dead);
  const carol = await register(dead.target, { name: "ts-fo-carol" }, undefined, { targets: [live.target] });
  clients.push(carol);
  const info = await carol.connect();
  assert.equal(info.agentId, carol.agentId);
});

test("several targets must be IP host:port of one family", () => {
  assert.equal(channelTarget("127.0.0.1:1", ["127.0.0.1:2", "127.0.0.1:1"]), "ipv4:127.0.0.1:1,127.0.0.1:2");
  assert.equal(channelTarget("hub.example:1"), "hub.example:1");
  assert.equal(channelTarget("[::1]:1", ["[::1]:2"]), "ipv6:[::1]:1,[::1]:2");
  for (const bad of [["hub.example:1", "127.0.0.1:2"], ["127.0.0.1:1", "[::1]:2"], ["127.0.0.1", "127.0.0.1:2"]]) {
    assert.throws(
      () => channelTarget(bad[0] ?? "", bad.slice(1)),
      (err: unknown) => err instanceof AgentNetError && err.reason === Reason.INVALID_ARGUMENT,
    );
  }
});

test("several targets over TLS need a server name every replica's certificate carries", () => {
  assert.throws(
    () => Client.fromCredential("127.0.0.1:1", "cred", "id", { targets: ["127.0.0.1:2"], tls: { caFile: "/nonexistent/ca.pem" } }),
    (err: unknown) => err instanceof AgentNetError && err.reason === Reason.INVALID_ARGUMENT && /serverName/.test(err.message),
  );
});
