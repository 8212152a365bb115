import assert from "node:assert/strict";
import { test } from "node:test";
import { AgentNetError, type AgentEnvelope, type Client, type ConnectOptions, Reason, register } from "../src";
import type { Post } from "../src/gen";
import { packPosts, postLimit } from "../src/postbatch";
import { useHub } from "../testkit/hub";
import { Collector } from "../testkit/wait";

const { hub, clients } = useHub();

/** PostBatch frames the client's stream sent (an internal counter of the session). */
function postBatchFrames(client: Client): number {
  return (client as unknown as { stream: { postBatchFrames: number } }).stream.postBatchFrames;
}

function queued(n: number): Post[] {
  return Array.from({ length: n }, (_, i) => ({ requestId: `r${i}`, envelope: undefined }));
}

// Queued posts are packed front first, at most `limit` per frame, a lone post (or
// limit 1) as a plain Post; draining the queue frame by frame sends every post once,
// in queue order.
test("packPosts packs the queue front first, up to the limit", () => {
  const cases: Array<[number, number, number[]]> = [
    // [queued, limit, posts per frame (negative = a plain Post)]
    [1, 256, [-1]],
    [2, 256, [2]],
    [5, 256, [5]],
    [5, 2, [2, 2, -1]],
    [6, 3, [3, 3]],
    [3, 1, [-1, -1, -1]],
    [3, 0, [-1, -1, -1]],
  ];
  for (const [n, limit, want] of cases) {
    let queue = queued(n);
    const frames: number[] = [];
    const sent: string[] = [];
    while (queue.length > 0) {
      const { frame, count } = packPosts(queue, limit);
      const f = frame?.frame;
      if (f?.$case === "post") {
        frames.push(-1);
        sent.push(f.value.requestId);
      } else if (f?.$case === "postBatch") {
        frames.push(f.value.posts.length);
        sent.push(...f.value.posts.map((p) => p.requestId));
      } else assert.fail(`not a post frame: ${JSON.stringify(frame)}`);
      assert.equal(Math.abs(frames[frames.length - 1] ?? 0), count, "count matches the frame");
      queue = queue.slice(count);
    }
    assert.deepEqual(frames, want, `${n} posts by ${limit}`);
    assert.deepEqual(sent, queued(n).map((p) => p.requestId), "in queue order");
  }
  assert.deepEqual(packPosts([], 8), { frame: undefined, count: 0 });
});

// The limit is the hub's max_post_batch, lowered by maxPostBatch; a hub without
// PostBatch (0) or maxPostBatch 0 means a frame per post.
test("postLimit: the hub's limit, lowered by the option", () => {
  assert.equal(postLimit(256, undefined), 256);
  assert.equal(postLimit(256, 16), 16);
  assert.equal(postLimit(16, 256), 16);
  assert.equal(postLimit(0, undefined), 1);
  assert.equal(postLimit(0, 16), 1);
  assert.equal(postLimit(256, 0), 1);
  assert.equal(postLimit(1, undefined), 1);
});

/** Register alice and `peers` (all connected, acking), and open a conversation from alice to each peer. */
async function setup(tag: string, peers: number, options: ConnectOptions): Promise<{ alice: Client; channels: string[] }> {
  const names = ["a", ...Array.from({ length: peers }, (_, i) => `p${i}`)].map((n) => `ts-pb-${tag}-${n}`);
  const all = await Promise.all(names.map((name) => register(hub.target, { name })));
  clients.push(...all);
  const [alice, ...others] = all;
  assert.ok(alice);
  await Promise.all([alice.connect(options), ...others.map((c) => c.connect())]);
  for (const c of all) new Collector(c, true);
  const channels = [];
  for (const peer of others) {
    channels.push((await alice.openChannel({ type: "conversation", targets: [peer.agentId], waitUntilOpened: true })).channel.channelId);
  }
  return { alice, channels };
}

/** The texts the hub stored in a channel, by seq. */
async function storedTexts(client: Client, channelId: string): Promise<Map<number, string | undefined>> {
  const stored = new Map<number, string | undefined>();
  for (const e of await client.readWal(channelId)) if (e.text !== undefined) stored.set(e.seq, e.text);
  return stored;
}

// Posts made together leave in one PostBatch frame (or frames of at most
// maxPostBatch; single Posts with 0), are admitted in the order they were made,
// and each gets its own result: a refused one its own error while the others succeed.
for (const [maxPostBatch, wantFrames] of [
  [undefined, 1],
  [3, 3], // 10 posts: 3+3+3 in PostBatch frames, the last as a Post
  [0, 0],
] as const) {
  test(`posts made together leave together (maxPostBatch ${maxPostBatch ?? "default"})`, async () => {
    const { alice, channels } = await setup(`held${maxPostBatch ?? "d"}`, 2, maxPostBatch === undefined ? {} : { maxPostBatch });
    const refused = 4;
    const target = (i: number): string => (i === refused ? "no-such-channel" : (channels[i % 2] as string));
    const before = postBatchFrames(alice);
    const settled = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => alice.postText(target(i), `p${i}`)));
    assert.equal(postBatchFrames(alice) - before, wantFrames, "PostBatch frames");
    const last = new Map<string, number>();
    settled.forEach((r, i) => {
      if (i === refused) {
        assert.equal(r.status, "rejected");
        assert.ok(r.status === "rejected" && AgentNetError.is(r.reason, Reason.NOT_FOUND), `post ${i}: ${String(r.status === "rejected" && r.reason)}`);
        return;
      }
      assert.equal(r.status, "fulfilled", `post ${i}: ${String(r.status === "rejected" && r.reason)}`);
      const env = (r as PromiseFulfilledResult<AgentEnvelope>).value;
      assert.equal(env.channelId, target(i));
      assert.equal(env.text, `p${i}`, "its own result");
      assert.ok(env.seq > (last.get(env.channelId) ?? 0), `post ${i} admitted after a later post`);
      last.set(env.channelId, env.seq);
    });
    for (const channelId of channels) {
      const stored = await storedTexts(alice, channelId);
      settled.forEach((r, i) => {
        if (r.status === "fulfilled" && r.value.channelId === channelId) assert.equal(stored.get(r.value.seq), `p${i}`);
      });
    }
  });
}

// Many writers posting over one client at once all get their own results; each
// writer's posts are admitted in the order it made them, and the hub stored every
// post at the seq its result names.
for (const maxPostBatch of [undefined, 0]) {
  test(`concurrent posts over one stream get their own results, in order (maxPostBatch ${maxPostBatch ?? "default"})`, async () => {
    const { alice, channels } = await setup(`conc${maxPostBatch ?? "d"}`, 3, maxPostBatch === undefined ? {} : { maxPostBatch });
    const writers = 8;
    const each = 25;
    const results: AgentEnvelope[] = [];
    await Promise.all(
      channels.flatMap((channelId) =>
        Array.from({ length: writers }, async (_, w) => {
          let prev = 0;
          for (let i = 0; i < each; i++) {
            const env = await alice.postText(channelId, `w${w}-${i}`);
            assert.equal(env.channelId, channelId);
            assert.equal(env.text, `w${w}-${i}`, "its own result");
            assert.ok(env.seq > prev, `w${w}-${i} admitted at ${env.seq}, before its predecessor's ${prev}`);
            prev = env.seq;
            results.push(env);
          }
        }),
      ),
    );
    assert.equal(results.length, channels.length * writers * each);
    for (const channelId of channels) {
      const stored = await storedTexts(alice, channelId);
      assert.equal(stored.size, writers * each, "every post stored once");
      for (const env of results) if (env.channelId === channelId) assert.equal(stored.get(env.seq), env.text);
    }
    // The writers' first posts are made in one turn of the event loop: they leave together.
    if (maxPostBatch === 0) assert.equal(postBatchFrames(alice), 0);
    else assert.ok(postBatchFrames(alice) > 0, "no PostBatch frame");
  });
}
