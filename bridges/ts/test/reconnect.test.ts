import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { AgentNetError, Client, type InboundEnvelope, JsonFileCursorStore, register } from "../src";
import { useHub } from "../testkit/hub";
import { Collector, waitFor } from "../testkit/wait";

const { hub, clients } = useHub();

test("a participant that reconnects gets every missed envelope once and nothing twice", async () => {
  const [alice, bob, carol] = await Promise.all(["a", "b", "c"].map((n) => register(hub.target, { name: `ts-rc-${n}` })));
  assert.ok(alice && bob && carol);
  clients.push(alice, bob, carol);
  const cursorFile = join(hub.dir, "carol.cursors.json");
  const store = new JsonFileCursorStore(cursorFile);
  await Promise.all([alice.connect(), bob.connect(), carol.connect({ cursorStore: store })]);
  new Collector(alice, true);
  new Collector(bob, true);

  // carol acks by hand so the test controls what she has processed
  const seen: InboundEnvelope[] = [];
  const carolLoop = (async () => {
    for await (const env of carol.envelopes()) seen.push(env);
  })();
  const seenText = (text: string) => () => seen.find((e) => e.text === text);

  const opened = await alice.openChannel({
    type: "discussion",
    targets: [bob.agentId, carol.agentId],
    message: "m1",
    waitUntilOpened: true,
  });
  const channelId = opened.channel.channelId;
  const m2 = await bob.postText(channelId, "m2");
  await waitFor(seenText("m2"), "carol to receive m2");
  const m1 = seen.find((e) => e.text === "m1");
  assert.ok(m1);
  const m3 = await carol.postText(channelId, "m3"); // her own post is not delivered to her

  // carol processed everything except m2
  for (const env of seen) if (env.text !== "m2") env.ack();
  await waitFor(() => carol.cursors()[channelId] === m1.seq, `carol's cursor to reach m1 (seq ${m1.seq})`);

  await carol.disconnect();
  assert.equal(carol.connectionState, "idle");
  const persisted = JSON.parse(await readFile(cursorFile, "utf8")) as Record<string, Record<string, number>>;
  assert.equal(persisted[carol.agentId]?.[channelId], m1.seq, "the cursor file holds carol's cursor");
  const m4 = await alice.postText(channelId, "m4");
  const m5 = await bob.postText(channelId, "m5");

  const before = seen.length;
  const info = await carol.connect({ cursorStore: store });
  assert.equal(info.agentId, carol.agentId);
  assert.equal(info.resumeCursors[channelId], m1.seq, "the hub resumed from carol's own cursor");
  await waitFor(seenText("m5"), "carol to receive m5 after reconnecting");
  // m2 was replayed too (never acked) but carol still holds it: dropped as a duplicate
  const m6 = await carol.postText(channelId, "m6");
  const m7 = await alice.postText(channelId, "m7");
  // a live envelope after the replay proves the replay is over
  await waitFor(seenText("m7"), "carol to receive m7 live");
  const after = seen.slice(before);
  assert.deepEqual(
    after.map((e) => [e.text, e.seq, e.replay]),
    [
      ["m4", m4.seq, true],
      ["m5", m5.seq, true],
      ["m7", m7.seq, false],
    ],
  );
  const ids = seen.map((e) => e.envelopeId);
  assert.equal(new Set(ids).size, ids.length, "no envelope was handed out twice");
  assert.ok(!ids.includes(m3.envelopeId) && !ids.includes(m6.envelopeId), "own posts are not delivered");

  for (const env of seen) env.ack(); // m2 (from before the reconnect), m4, m5, m7
  await waitFor(() => carol.cursors()[channelId] === m7.seq, "carol's cursor to reach m7");
  assert.equal(m2.seq, m1.seq + 1);

  // A new process for carol (same credential and cursor file) resumes after m7: nothing old comes back.
  await carol.close();
  await carolLoop;
  const again = Client.fromCredential(hub.target, carol.credential, carol.agentId);
  clients.push(again);
  const resumed = new Collector(again, true);
  await again.connect({ cursorStore: store });
  const m8 = await bob.postText(channelId, "m8");
  await resumed.waitFor((e) => e.envelopeId === m8.envelopeId, "the restarted carol to receive m8");
  assert.deepEqual(
    resumed.received.map((e) => e.text),
    ["m8"],
  );
});

test("the stream survives a hub crash and restart: the bridge reconnects by itself and resumes", async () => {
  const alice = await register(hub.target, { name: "ts-restart-a" });
  const bob = await register(hub.target, { name: "ts-restart-b" });
  clients.push(alice, bob);
  const states: string[] = [];
  const errors: string[] = [];
  await Promise.all([
    alice.connect(),
    bob.connect({ onStateChange: (s) => states.push(s), onError: (e) => errors.push(e.reason) }),
  ]);
  new Collector(alice, true);
  const inbox = new Collector(bob, true);
  const { channel } = await alice.openChannel({ type: "discussion", targets: [bob.name], message: "before", waitUntilOpened: true });
  await inbox.waitFor((e) => e.text === "before", "bob to receive 'before'");

  await hub.restart("SIGKILL"); // a crash: committed envelopes survive in the WAL
  await waitFor(() => states.includes("reconnecting"), "bob to notice the broken stream");
  await waitFor(() => bob.connectionState === "connected" && alice.connectionState === "connected", "both to reconnect", 20_000);
  const reply = await bob.postText(channel.channelId, "after the restart");
  const back = await alice.postText(channel.channelId, "welcome back");
  await inbox.waitFor((e) => e.envelopeId === back.envelopeId, "bob to receive 'welcome back'");
  assert.ok(reply.seq < back.seq);
  assert.deepEqual(inbox.texts(channel.channelId), ["before", "welcome back"], "nothing lost, nothing twice");
  assert.deepEqual(errors, [], "a restart is not an error");
});

test("a newer Connect of the same identity replaces the stream: the old client stops", async () => {
  const agent = await register(hub.target, { name: "ts-replaced" });
  clients.push(agent);
  const errors: AgentNetError[] = [];
  await agent.connect({ onError: (e) => errors.push(e) });
  const envelopes = agent.envelopes();
  const twin = Client.fromCredential(hub.target, agent.credential, agent.agentId);
  clients.push(twin);
  const newer = await twin.connect();
  await waitFor(() => agent.connectionState === "failed", "the replaced client to stop");
  assert.deepEqual(
    errors.map((e) => [e.code, e.reason, e.metadata.superseded_by]),
    [[9, "SUPERSEDED", newer.sessionId]],
  );
  await assert.rejects(envelopes.next(), (err: unknown) => err instanceof Error && /replaced/.test(err.message));
  assert.equal(twin.connectionState, "connected");
});

test("a client coming back learns the turns its channels await from it (Welcome.pending_turns)", async () => {
  const alice = await register(hub.target, { name: "ts-pending-a" });
  const bob = await register(hub.target, { name: "ts-pending-b" });
  clients.push(alice, bob);
  new Collector(alice, true);
  const inbox = new Collector(bob, true);
  await Promise.all([alice.connect(), bob.connect()]);
  const { channel } = await alice.openChannel({ type: "consulting", targets: [bob.name], waitUntilOpened: true });
  const question = await alice.postText(channel.channelId, "still there?");
  await inbox.waitFor((e) => e.envelopeId === question.envelopeId, "bob to receive the question");
  await bob.close(); // read (and acked), not answered
  const again = Client.fromCredential(hub.target, bob.credential, bob.agentId);
  clients.push(again);
  const info = await again.connect();
  assert.deepEqual(info.pendingTurns, [{ channelId: channel.channelId, seq: question.seq, envelopeId: question.envelopeId }]);
  assert.equal(info.pendingTurnsTruncated, false);
  assert.deepEqual(await again.listPendingTurns(), { turns: info.pendingTurns, nextPageToken: "" });
});
