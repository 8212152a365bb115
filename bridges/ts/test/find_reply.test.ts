import assert from "node:assert/strict";
import { test } from "node:test";
import { AgentNetError, EventType, Reason, register } from "../src";
import { useHub } from "../testkit/hub";

const { hub, clients } = useHub();

test("findReply finds the reply a participant already posted to an envelope", async () => {
  const [alice, bob] = await Promise.all(["alice", "bob"].map((n) => register(hub.target, { name: `ts-find-${n}` })));
  assert.ok(alice && bob);
  clients.push(alice, bob);
  await Promise.all([alice.connect(), bob.connect()]);
  const opened = await alice.openChannel({ type: "conversation", targets: [bob.agentId], waitUntilOpened: true });
  const channelId = opened.channel.channelId;
  const question = await alice.postText(channelId, "question?");
  assert.equal(await bob.findReply(channelId, question.envelopeId), undefined, "not answered yet");
  const answer = await bob.postText(channelId, "the answer", { causationId: question.envelopeId });
  // A handler answering the question again (a redelivery) finds its own reply first.
  const own = await bob.findReply(channelId, question.envelopeId);
  assert.equal(own?.envelopeId, answer.envelopeId);
  assert.equal(own?.eventType, EventType.TEXT);
  const bobs = await alice.findReply(channelId, question.envelopeId, bob.name);
  assert.equal(bobs?.causationId, question.envelopeId);
  assert.equal(await alice.findReply(channelId, question.envelopeId), undefined, "alice did not answer it");
  await assert.rejects(alice.findReply(channelId, ""), (err: unknown) => AgentNetError.is(err, Reason.INVALID_ARGUMENT));
});
