import assert from "node:assert/strict";
import { test } from "node:test";
import { AgentNetError, type Client, EventType, Reason, register } from "../src";
import { useHub } from "../testkit/hub";
import { Collector } from "../testkit/wait";

const { hub, clients } = useHub();

async function pair(): Promise<{ alice: Client; bob: Client; channelId: string }> {
  const alice = await register(hub.target, { name: `ts-err-a-${clients.length}` });
  const bob = await register(hub.target, { name: `ts-err-b-${clients.length}` });
  clients.push(alice, bob);
  await Promise.all([alice.connect(), bob.connect()]);
  const opened = await alice.openChannel({ type: "discussion", targets: [bob.agentId], waitUntilOpened: true });
  assert.equal(opened.channel.state, 2 /* OPENED */);
  return { alice, bob, channelId: opened.channel.channelId };
}

test("stream posts: spoofed sender is PERMISSION_DENIED, out of turn is NOT_YOUR_TURN", async () => {
  const { alice, bob, channelId } = await pair();
  new Collector(bob, true);

  const spoof = alice.postText(channelId, "I am bob", { senderId: bob.agentId });
  await assert.rejects(spoof, (err: unknown) => {
    assert.ok(err instanceof AgentNetError);
    assert.equal(err.reason, Reason.PERMISSION_DENIED);
    assert.equal(err.code, 7);
    assert.equal(err.codeName, "PERMISSION_DENIED");
    assert.equal(err.metadata["channel_id"], channelId);
    return true;
  });

  // alice (the initiator) speaks first: bob is out of turn.
  await assert.rejects(bob.postText(channelId, "me first"), (err: unknown) => {
    assert.ok(AgentNetError.is(err, Reason.NOT_YOUR_TURN));
    assert.equal(err.code, 9);
    assert.match(err.message, /turn/);
    return true;
  });

  const first = await alice.postText(channelId, "hello bob");
  assert.equal(first.senderId, alice.agentId);
  assert.equal(first.text, "hello bob");
  assert.ok(first.seq > 0);
  // alice again: now it is bob's turn
  await assert.rejects(alice.postText(channelId, "again"), (err: unknown) => AgentNetError.is(err, Reason.NOT_YOUR_TURN));
});

test("unary paths decode the status trailer into the same typed errors", async () => {
  const { alice, bob, channelId } = await pair();
  await bob.disconnect(); // not connected: post() falls back to PostEnvelope
  assert.equal(bob.connectionState, "idle");
  await assert.rejects(bob.postText(channelId, "out of turn"), (err: unknown) => {
    assert.ok(AgentNetError.is(err, Reason.NOT_YOUR_TURN));
    assert.equal(err.domain, "agentnet.v1");
    assert.equal(err.code, 9);
    return true;
  });
  await assert.rejects(
    bob.post({ channelId, eventType: EventType.TEXT, eventData: { text: "x" }, senderId: alice.agentId }),
    (err: unknown) => AgentNetError.is(err, Reason.PERMISSION_DENIED),
  );
  await assert.rejects(alice.describeChannel("no-such-channel"), (err: unknown) => {
    assert.ok(AgentNetError.is(err, Reason.NOT_FOUND));
    assert.equal(err.code, 5);
    return true;
  });
  await assert.rejects(
    register(hub.target, { name: alice.name }),
    (err: unknown) => AgentNetError.is(err, Reason.ALREADY_EXISTS),
  );
  // consulting: one question, one reply, then CHANNEL_CLOSED
  const consult = await alice.openChannel({ type: "consulting", targets: [bob.name], message: "q?", waitUntilOpened: false });
  await bob.connect();
  const cid = consult.channel.channelId;
  const collector = new Collector(bob, true);
  await collector.waitFor((e) => e.channelId === cid && e.text === "q?", "the consulting question");
  await bob.postText(cid, "a!");
  await assert.rejects(bob.postText(cid, "more"), (err: unknown) => AgentNetError.is(err, Reason.CHANNEL_CLOSED));
});
