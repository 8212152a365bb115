import assert from "node:assert/strict";
import { test } from "node:test";
import { EventType, finish, handoff, register } from "../src";
import { useHub } from "../testkit/hub";

const { hub, clients } = useHub();

test("a TS client routes a workflow with a typed handoff, then ends it with a finish naming the close reason", async () => {
  const [alice, bob] = await Promise.all(
    ["alice", "bob"].map((name) => register(hub.target, { name: `ts-wf-${name}` }, { summary: `${name} (test)` })),
  );
  assert.ok(alice && bob);
  clients.push(alice, bob);
  await Promise.all([alice.connect(), bob.connect()]);
  const opened = await alice.openChannel({
    type: "workflow",
    targets: [bob.name],
    knobs: { transitions: [{ condition: { type: "always" }, target: { type: "stay" } }] },
    waitUntilOpened: true,
  });
  const channelId = opened.channel.channelId;
  // The transitions say "stay"; the handoff gives bob the turn anyway.
  await alice.postPacket(channelId, { body: "over to you", routing: handoff(bob.name, "bob knows", "pick") });
  assert.deepEqual((await alice.describeChannel(channelId)).expectedNext, [bob.agentId]);
  await bob.postPacket(channelId, { body: "done", routing: finish({ reason: "shipped", summary: "all good" }) });
  const described = await alice.describeChannel(channelId);
  assert.equal(described.channel.closeReason, "shipped");
  const packets = (await alice.readWal(channelId)).filter((e) => e.eventType === EventType.PACKET);
  assert.deepEqual(
    packets.map((e) => e.eventData["routing"]),
    [
      { tool_called: "pick", kind: "handoff", target: bob.name, reason: "bob knows" },
      { kind: "finish", close_reason: "shipped", summary: "all good" },
    ],
  );
});
