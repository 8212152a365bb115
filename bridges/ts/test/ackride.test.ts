import assert from "node:assert/strict";
import { test } from "node:test";
import { type Client, EventType, type InboundEnvelope, register } from "../src";
import { ackWait, DEFAULT_ACK_DELAY_MS } from "../src/session";
import { packPosts } from "../src/postbatch";
import { useHub } from "../testkit/hub";
import { Collector, waitFor } from "../testkit/wait";

const { hub, clients } = useHub();

/** The session's frame counters: Ack frames, post frames carrying acks, PostBatch frames of several posts. */
function counters(client: Client): Counters {
  const { ackFrames, ackRides, postBatchFrames } = (client as unknown as { stream: Counters }).stream;
  return { ackFrames, ackRides, postBatchFrames };
}

interface Counters {
  ackFrames: number;
  ackRides: number;
  postBatchFrames: number;
}

/** How much each counter grew since `before`. */
function since(client: Client, before: Counters): Counters {
  const now = counters(client);
  return {
    ackFrames: now.ackFrames - before.ackFrames,
    ackRides: now.ackRides - before.ackRides,
    postBatchFrames: now.postBatchFrames - before.postBatchFrames,
  };
}

/**
 * Alice opens a conversation with bob; bob sees it open (acking all of it) and
 * disconnects; alice posts `n` questions while he is away. Bob keeps his cursors, so
 * his next stream resumes right after the opening.
 */
async function askBob(tag: string, n: number): Promise<{ alice: Client; bob: Client; channelId: string; answers: Collector }> {
  const [alice, bob] = await Promise.all(["a", "b"].map((x) => register(hub.target, { name: `ts-ride-${tag}-${x}` })));
  assert.ok(alice && bob);
  clients.push(alice, bob);
  await Promise.all([alice.connect(), bob.connect()]);
  const answers = new Collector(alice, true);
  const opened = await alice.openChannel({ type: "conversation", targets: [bob.agentId], waitUntilOpened: true });
  const channelId = opened.channel.channelId;
  const first = bob.envelopes();
  for (;;) {
    const { value, done } = await first.next();
    assert.ok(done !== true, "bob's envelopes ended before the channel opened");
    value.ack();
    if (value.channelId === channelId && value.eventType === EventType.CHANNEL_OPENED) break;
  }
  await first.return?.();
  await bob.disconnect();
  for (let i = 0; i < n; i++) await alice.postText(channelId, `q${i}`);
  return { alice, bob, channelId, answers };
}

/** The next text envelope bob is handed (not acked). */
async function question(envelopes: AsyncIterator<InboundEnvelope>, channelId: string): Promise<InboundEnvelope> {
  const { value, done } = await envelopes.next();
  assert.ok(done !== true, "bob's envelopes ended");
  assert.equal(value.channelId, channelId);
  assert.equal(value.eventType, EventType.TEXT, `a question, not ${value.eventType} (seq ${value.seq})`);
  return value;
}

// A request/answer exchange whose acks ride in the answers' frames: bob's stream has
// max_in_flight 1, so the hub sends him the next question only once the last one is
// acked, and his ackDelayMs is far longer than the test, so no Ack frame could have
// carried them: every question arrives because the answer to its predecessor carried
// that ack (in a PostBatch of one).
test("acks ride in the frames of the answers", async () => {
  const n = 4;
  const { bob, channelId, answers } = await askBob("ride", n);
  const before = counters(bob);
  await bob.connect({ maxInFlight: 1, ackDelayMs: 3_600_000 });
  const envelopes = bob.envelopes();
  for (let i = 0; i < n; i++) {
    const q = await question(envelopes, channelId);
    assert.equal(q.text, `q${i}`);
    q.ack();
    await bob.postText(channelId, `re ${q.text}`, { causationId: q.envelopeId });
  }
  assert.deepEqual(since(bob, before), { ackFrames: 0, ackRides: n, postBatchFrames: 0 }, "every ack rode in an answer's frame");
  await answers.waitFor((e) => e.channelId === channelId && e.text === `re q${n - 1}`, "alice to get the last answer");
});

// With no post to ride in, an ack still reaches the hub within ackDelayMs, in an Ack
// frame of its own: bob (max_in_flight 1, the default delay) acks the questions
// without answering and still receives every one.
test("acks without posts still arrive, in Ack frames", async () => {
  const n = 4;
  const { bob, channelId } = await askBob("timer", n);
  const before = counters(bob);
  await bob.connect({ maxInFlight: 1 });
  const envelopes = bob.envelopes();
  for (let i = 0; i < n; i++) {
    const q = await question(envelopes, channelId);
    assert.equal(q.text, `q${i}`);
    q.ack();
  }
  assert.equal(since(bob, before).ackRides, 0, "bob posted nothing");
  // The last ack goes out on its own too (no disconnect flushes it).
  await waitFor(() => since(bob, before).ackFrames === n, "the last ack's frame");
});

// Acks ride only with a hub that reads them in a PostBatch and takes PostBatch frames
// at all, and only when ackDelayMs is not 0.
test("ackWait: only a hub that reads acks in a PostBatch gets them there", () => {
  assert.equal(ackWait(true, 256, undefined), DEFAULT_ACK_DELAY_MS);
  assert.equal(ackWait(true, 1, 20), 20);
  assert.equal(ackWait(false, 256, 20), 0, "a hub older than post_batch_ack");
  assert.equal(ackWait(true, 0, 20), 0, "a hub without PostBatch");
  assert.equal(ackWait(true, 256, 0), 0, "the client opted out");
});

// Acks riding along make even a lone post a PostBatch; without acks nothing changes.
test("packPosts carries acks in a PostBatch, even of one post", () => {
  const ack = { entries: [{ channelId: "c", seq: 7 }] };
  const posts = [0, 1, 2].map((i) => ({ requestId: `r${i}`, envelope: undefined }));
  for (const [queued, limit, count] of [
    [1, 256, 1],
    [1, 1, 1],
    [3, 256, 3],
    [3, 2, 2],
  ] as const) {
    const packed = packPosts(posts.slice(0, queued), limit, ack);
    assert.equal(packed.count, count);
    const f = packed.frame?.frame;
    assert.ok(f?.$case === "postBatch", `${queued} by ${limit}: a PostBatch`);
    assert.equal(f.value.posts.length, count);
    assert.equal(f.value.ack, ack);
  }
  assert.equal(packPosts(posts.slice(0, 1), 256).frame?.frame?.$case, "post");
});
