import assert from "node:assert/strict";
import { test } from "node:test";
import { AgentNetError, Reason, register } from "../src";
import { useHub } from "../testkit/hub";

const { hub, clients } = useHub();

async function refused(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof AgentNetError, String(err));
    return err.reason;
  }
  assert.fail("the call was not refused");
}

test("setRule narrows this identity's own rule after registration; getRule reads it back", async () => {
  const agent = await register(hub.target, { name: "ts-ruled" });
  const peer = await register(hub.target, { name: "ts-ruled-peer" });
  clients.push(agent, peer);
  await agent.openChannel({ type: "conversation", targets: [peer.name] });
  await agent.setRule({ limits: { max_open_channels: 1 } });
  assert.equal(await refused(agent.openChannel({ type: "conversation", targets: [peer.name] })), Reason.LIMIT_EXCEEDED);
  const read = await agent.getRule();
  assert.deepEqual(read.rule, { limits: { max_open_channels: 1 } });
  assert.deepEqual(read.rules.map((r) => r.id), ["default", "own"]);
  assert.deepEqual(read.effective["limits"], { max_open_channels: { value: 1, rule: "own" } });
  assert.equal(await refused(agent.setRule({ limitz: {} })), Reason.INVALID_ARGUMENT);
  await agent.setRule(null);
  await agent.openChannel({ type: "conversation", targets: [peer.name] });
});
