import assert from "node:assert/strict";
import { test } from "node:test";
import { AgentNetError, Reason, register } from "../src";
import { useHub } from "../testkit/hub";

const { hub, clients } = useHub();

test("unregister retires the identity, and a second unregister is a no-op", async () => {
  const [alice, bob] = await Promise.all(["alice", "bob"].map((n) => register(hub.target, { name: `ts-unreg-${n}` })));
  assert.ok(alice && bob);
  clients.push(alice, bob);
  const opened = await alice.openChannel({ type: "conversation", targets: [bob.agentId] });
  assert.deepEqual(await bob.unregister(), [opened.channel.channelId], "its live channel closed");
  assert.deepEqual(await bob.unregister(), [], "the second call changes nothing");
  await assert.rejects(alice.describeAgent({ name: bob.name }), (err: unknown) => AgentNetError.is(err, Reason.NOT_FOUND));
});
