import assert from "node:assert/strict";
import { test } from "node:test";
import { Client, EventType, register } from "../src";
import { useHub } from "../testkit/hub";
import { Collector, waitFor } from "../testkit/wait";

const { hub, clients } = useHub();

/** Batch frames the client's stream received (an internal counter of the session). */
function batchFrames(client: Client): number {
  return (client as unknown as { stream: { batchFrames: number } }).stream.batchFrames;
}

// A backlog posted while bob is away reaches him complete and in order when he
// connects again (in Batch frames unless maxBatch is 0), and his acks move the
// cursor the hub stores for him past all of it.
for (const maxBatch of [undefined, 0]) {
  test(`a backlog arrives complete and in order (maxBatch ${maxBatch ?? "default"})`, async () => {
    const tag = maxBatch ?? "d";
    const [alice, bob] = await Promise.all(["a", "b"].map((n) => register(hub.target, { name: `ts-batch-${tag}-${n}` })));
    assert.ok(alice && bob);
    clients.push(alice, bob);
    await Promise.all([alice.connect(), bob.connect()]);
    new Collector(alice, true);
    const bobs = new Collector(bob, true);
    const opened = await alice.openChannel({ type: "conversation", targets: [bob.agentId], waitUntilOpened: true });
    const channelId = opened.channel.channelId;
    await bobs.waitFor((e) => e.channelId === channelId && e.eventType === EventType.CHANNEL_OPENED, "bob to see the channel open");
    await bob.disconnect();
    const framesBefore = batchFrames(bob);

    const sent = [];
    for (let i = 0; i < 40; i++) sent.push(await alice.postText(channelId, `m${i}`));
    const last = sent[sent.length - 1]?.seq ?? 0;

    await bob.connect(maxBatch === undefined ? {} : { maxBatch });
    await bobs.waitFor((e) => e.channelId === channelId && e.seq === last, "bob to receive the whole backlog", 30_000);
    assert.deepEqual(
      bobs.texts(channelId),
      sent.map((_, i) => `m${i}`),
    );
    const seqs = bobs.received.filter((e) => e.channelId === channelId && e.text !== undefined).map((e) => e.seq);
    assert.deepEqual(seqs, sent.map((e) => e.seq), "in seq order");
    const frames = batchFrames(bob) - framesBefore;
    if (maxBatch === 0) assert.equal(frames, 0, "no Batch frame with maxBatch 0");
    else assert.ok(frames > 0, "the backlog came in Batch frames");
    await waitFor(() => bob.cursors()[channelId] === last, `bob's cursor to reach ${last}`, 20_000);

    // The hub stored the acked cursor: a client that sends no cursors resumes from it.
    await bob.disconnect();
    const deadline = Date.now() + 20_000;
    for (;;) {
      const probe = Client.fromCredential(hub.target, bob.credential, bob.agentId);
      const stored = (await probe.connect()).resumeCursors[channelId];
      await probe.close();
      if (stored === last) break;
      assert.ok(Date.now() < deadline, `the hub's stored cursor for bob is ${stored}, want ${last}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  });
}
