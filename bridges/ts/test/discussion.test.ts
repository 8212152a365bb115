import assert from "node:assert/strict";
import { test } from "node:test";
import { type ChannelOutcome, runDiscussionParticipant } from "../examples/discussion_participant";
import { EventType, register } from "../src";
import { useHub } from "../testkit/hub";

const { hub, clients } = useHub();

test("three TS participants complete three discussion rounds in round-robin order", async () => {
  const [alice, bob, carol] = await Promise.all(
    ["alice", "bob", "carol"].map((name) => register(hub.target, { name: `ts-${name}` }, { summary: `${name} (test)` })),
  );
  assert.ok(alice && bob && carol);
  clients.push(alice, bob, carol);
  await Promise.all([alice.connect(), bob.connect(), carol.connect()]);

  // bob and carol run the example participant; the bridge acks their invites.
  const runs: Array<Promise<Map<string, ChannelOutcome>>> = [bob, carol].map((c) =>
    runDiscussionParticipant(c, { channels: 1 }),
  );
  for (const run of runs) run.catch(() => undefined); // awaited below; no unhandled rejection if an assert fails first
  const opened = await alice.openChannel({
    type: "discussion",
    targets: [bob.name, carol.agentId], // by name and by id
    knobs: { max_rounds: 3 },
    intent: "three rounds",
    message: "alice opens: what should we build?",
    waitUntilOpened: true,
  });
  const channelId = opened.channel.channelId;
  assert.equal(opened.channel.participants.map((p) => p.agentId).join(","), [alice, bob, carol].map((c) => c.agentId).join(","));

  // alice (the initiator) speaks first with the seed, then takes her turns with the example too.
  const aliceRun = runDiscussionParticipant(alice, { channelId, channels: 1 });
  const [aliceOut, bobOut, carolOut] = await Promise.all([aliceRun, ...runs]);

  const texts = (await alice.readWal(channelId)).filter((e) => e.eventType === EventType.TEXT);
  const speakers = texts.map((e) => e.senderId);
  const order = [alice, bob, carol].map((c) => c.agentId);
  assert.deepEqual(speakers, [...order, ...order, ...order], "strict round robin, three rounds");
  assert.equal(texts[0]?.text, "alice opens: what should we build?");
  assert.deepEqual(
    texts.slice(1).map((e) => /^ts-agent round (\d):/.exec(e.text ?? "")?.[1]),
    ["1", "1", "2", "2", "2", "3", "3", "3"],
  );
  // each line answers the previous speaker's envelope
  for (let i = 1; i < texts.length; i++) assert.equal(texts[i]?.causationId, texts[i - 1]?.envelopeId);

  assert.equal(aliceOut.get(channelId)?.lines.length, 2);
  assert.equal(bobOut.get(channelId)?.lines.length, 3);
  assert.equal(carolOut.get(channelId)?.lines.length, 3);
  for (const out of [aliceOut, bobOut, carolOut]) assert.equal(out.get(channelId)?.closeReason, "max_turns");

  const described = await bob.describeChannel(channelId);
  assert.equal(described.channel.closeReason, "max_turns");
  assert.deepEqual(described.expectedNext, []);
});
