import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { AgentNetError, Client, type InboundEnvelope, type PostedEnvelope, Reason, register } from "../src";
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

  // Three of alice's loops post with PostEnvelope (she has no stream) and bob posts over
  // his Connect stream, each without pause and without retrying: the bridge must carry
  // every post across the failover itself, so a post it fails ends the test. Every text
  // is unique, and no poster gives an idempotency key: the bridge makes one.
  const posts = new PostLog();
  const names = ["alice-1", "alice-2", "alice-3", "bob"];
  let stop = false;
  const posters = names.map(async (name) => {
    const client = name === "bob" ? bob : alice;
    for (let i = 0; !stop; i++) {
      const text = `${name} ${i}`;
      posts.start(name, text);
      try {
        posts.ok(name, text, await client.postText(channelId, text));
      } catch (err) {
        posts.fail(name, text, err);
        return;
      }
    }
  });

  await waitFor(() => posts.count() >= 10, "the first posts acknowledged", 20_000);
  arm = true;
  await waitFor(() => held.length === 3, "bob to hold three envelopes unacked", 20_000);
  await a.kill();
  await waitFor(() => bob.connectionState !== "connected", "bob to notice his hub died", 20_000);
  // No hub is up: every poster is waiting on a post (in flight at the kill, or sent
  // since) that only the standby can answer.
  const stranded = await waitFor(
    () => (posts.error !== undefined ? [] : posts.waitingTexts(names).length === names.length && posts.waitingTexts(names)),
    "every poster to wait on a post while no hub is up",
    20_000,
  );
  assert.equal(posts.error, undefined, `a post failed while the hub was down (the bridge must retry it): ${String(posts.error)}`);
  const before = new Map(names.map((n) => [n, posts.count(n)]));
  const b = await startHub(["--store", store]);
  hubs.push(b);
  standby.pointTo(b.target);
  await waitFor(() => bob.connectionState === "connected", "bob to reconnect to the standby", 30_000);
  await waitFor(
    () => posts.error !== undefined || names.every((n) => posts.count(n) >= (before.get(n) ?? 0) + 3),
    "every poster's posts acknowledged by the standby",
    30_000,
  );
  stop = true;
  await Promise.all(posters);
  assert.equal(posts.error, undefined, `a post failed across the failover (the bridge must retry it): ${String(posts.error)}`);
  for (const text of stranded) assert.ok(posts.acked.has(text), `post "${text}", waiting while no hub was up, was acknowledged`);
  await bob.postText(channelId, "bob after failover");
  await posts.checkWal(alice, channelId);

  const want = posts.ids("alice-");
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

/** The posts of several posters: which is waiting, and what the bridge answered. */
class PostLog {
  /** Acknowledged posts by text. */
  readonly acked = new Map<string, PostedEnvelope>();
  /** The first failure. */
  error: unknown;
  private readonly waiting = new Map<string, string>();
  private readonly poster = new Map<string, string>();
  private readonly order: string[] = [];

  start(poster: string, text: string): void {
    this.waiting.set(poster, text);
    this.poster.set(text, poster);
  }

  ok(poster: string, text: string, env: PostedEnvelope): void {
    this.waiting.delete(poster);
    this.acked.set(text, env);
    this.order.push(text);
  }

  fail(poster: string, text: string, err: unknown): void {
    this.waiting.delete(poster);
    this.error ??= new Error(`post "${text}": ${String(err)}`);
  }

  /** The posts in progress, one per poster that has one. */
  waitingTexts(posters: string[]): string[] {
    return posters.flatMap((p) => {
      const text = this.waiting.get(p);
      return text === undefined ? [] : [text];
    });
  }

  /** How many posts of `poster` (undefined: of all) were acknowledged. */
  count(poster?: string): number {
    return this.order.filter((text) => poster === undefined || this.poster.get(text) === poster).length;
  }

  /** Envelope ids of the acknowledged posts of posters whose name starts with `prefix`. */
  ids(prefix: string): string[] {
    return this.order.filter((text) => this.poster.get(text)?.startsWith(prefix)).map((text) => this.acked.get(text)?.envelopeId ?? "");
  }

  /**
   * Every acknowledged post is in the channel's WAL exactly once, by idempotency key and
   * by text, as the envelope the bridge returned, and no post is in it twice.
   */
  async checkWal(client: Client, channelId: string): Promise<void> {
    const wal = (await client.readWal(channelId)).filter((e) => e.text !== undefined);
    const texts = wal.map((e) => e.text);
    assert.equal(new Set(texts).size, texts.length, "no post is in the WAL twice");
    for (const [text, env] of this.acked) {
      const key = env.raw.idempotencyKey ?? "";
      assert.match(key, /^ts-[0-9a-f-]{36}$/, `post "${text}": the bridge's idempotency key`);
      assert.equal(typeof env.duplicate, "boolean", `post "${text}": the answer says whether it was a duplicate`);
      const stored = wal.filter((e) => e.raw.idempotencyKey === key);
      assert.equal(stored.length, 1, `acknowledged post "${text}" (key ${key}) is in the WAL once`);
      assert.equal(stored[0]?.envelopeId, env.envelopeId, `post "${text}": the WAL holds the envelope the bridge answered`);
      assert.equal(stored[0]?.seq, env.seq);
      assert.equal(stored[0]?.text, text);
    }
  }
}

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
