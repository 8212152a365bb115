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

test("inbound_from in an identity's own rule refuses whom it does not pick (RULE_DENIED)", async () => {
  const vip = await register(hub.target, { name: "ts-vip" });
  const stranger = await register(hub.target, { name: "ts-stranger" });
  const assistant = await register(hub.target, { name: "ts-assistant-1" });
  clients.push(vip, stranger, assistant);
  await vip.setRule({ access: { inbound_from: { names: ["ts-assistant-*"] } } });
  assert.equal(await refused(stranger.openChannel({ type: "consulting", targets: [vip.name] })), Reason.RULE_DENIED);
  await assistant.openChannel({ type: "consulting", targets: [vip.name] });
});
