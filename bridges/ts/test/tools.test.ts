import assert from "node:assert/strict";
import { test } from "node:test";
import { AgentNetError, type Invite, isJsonObject, pb, Reason, register, registerHuman } from "../src";
import { useHub } from "../testkit/hub";
import { Collector } from "../testkit/wait";

const { hub, clients } = useHub();

test("tools: listTools, callTool(peers find), say", async () => {
  const agent = await register(hub.target, { name: "ts-tools-agent", description: "does tools" }, { claimedCapabilities: ["typescript"] });
  const human = await registerHuman(hub.target, { name: "ts-tools-human" });
  clients.push(agent, human);
  assert.equal(agent.record?.passport?.kind, pb.PassportKind.PASSPORT_KIND_REMOTE_AGENT);
  assert.equal(human.record?.passport?.kind, pb.PassportKind.PASSPORT_KIND_HUMAN);
  await Promise.all([agent.connect(), human.connect()]);
  const humanInbox = new Collector(human, true);

  const plugin = await agent.listTools();
  assert.deepEqual(plugin.map((t) => t.name).sort(), ["channels", "context", "delegate", "peers", "tasks"]);
  for (const tool of plugin) {
    assert.equal(tool.source, pb.ToolSource.TOOL_SOURCE_PLUGIN);
    assert.equal(tool.parameters["type"], "object");
  }

  const found = await agent.callTool("peers", { action: "find" });
  assert.ok(isJsonObject(found));
  const peers = found["peers"];
  assert.ok(Array.isArray(peers));
  const names = peers.map((p) => (isJsonObject(p) ? p["name"] : undefined));
  assert.ok(names.includes("ts-tools-human"), `peers: ${JSON.stringify(names)}`);
  assert.ok(!names.includes("ts-tools-agent"), "peers(find) leaves the caller out");

  const opened = await agent.openChannel({ type: "discussion", targets: [human.name], waitUntilOpened: true });
  const channelId = opened.channel.channelId;
  const turnTools = await agent.listTools(channelId, { excludePlugin: true });
  assert.deepEqual(
    turnTools.map((t) => [t.name, t.source]),
    [["say", pb.ToolSource.TOOL_SOURCE_ADAPTER]],
  );
  assert.deepEqual(await human.listTools(channelId, { excludePlugin: true }), [], "say only for the expected speaker");

  const said = await agent.say(channelId, "hello from say", { audience: [human.name] });
  assert.equal(said.text, "hello from say");
  assert.deepEqual(said.audience, [human.agentId]);
  const got = await humanInbox.waitFor((e) => e.envelopeId === said.envelopeId, "the human to receive the say");
  assert.equal(got.senderId, agent.agentId);

  const viaTool = await human.callTool("say", { content: "reply via callTool" }, { channelId });
  assert.ok(isJsonObject(viaTool) && typeof viaTool["seq"] === "number");

  await assert.rejects(agent.callTool("nope", {}), (err: unknown) => AgentNetError.is(err, Reason.INVALID_ARGUMENT));
});

test("onInvite gates invites: false posts invite_reject and the channel closes", async () => {
  const alice = await register(hub.target, { name: "ts-gate-a" });
  const bob = await register(hub.target, { name: "ts-gate-b" });
  clients.push(alice, bob);
  const invites: Invite[] = [];
  await bob.connect({
    onInvite: (invite) => {
      invites.push(invite);
      return invite.type !== "consulting";
    },
  });
  const refused = await alice.openChannel({ type: "consulting", targets: [bob.name], intent: "quick q", waitUntilOpened: true });
  assert.equal(refused.channel.state, pb.ChannelState.CHANNEL_STATE_CLOSED);
  assert.equal(refused.channel.closeReason, "invite_rejected");
  const accepted = await alice.openChannel({ type: "conversation", targets: [bob.name], waitUntilOpened: true });
  assert.equal(accepted.channel.state, pb.ChannelState.CHANNEL_STATE_OPENED);
  assert.deepEqual(
    invites.map((i) => [i.type, i.initiator, i.intent, i.participants]),
    [
      ["consulting", alice.agentId, "quick q", [alice.agentId, bob.agentId]],
      ["conversation", alice.agentId, "", [alice.agentId, bob.agentId]],
    ],
  );
});

test("readWal and streamWal(follow) see the channel's visible envelopes in seq order", async () => {
  const alice = await register(hub.target, { name: "ts-wal-a" });
  const bob = await register(hub.target, { name: "ts-wal-b" });
  clients.push(alice, bob);
  await bob.connect();
  const { channel } = await alice.openChannel({ type: "conversation", targets: [bob.agentId], waitUntilOpened: true });
  const followed: string[] = [];
  const follow = (async () => {
    for await (const env of alice.streamWal(channel.channelId)) followed.push(env.eventType);
  })();
  const first = await alice.postText(channel.channelId, "one");
  await bob.postText(channel.channelId, "two", { causationId: first.envelopeId });
  await alice.closeChannel(channel.channelId, "done here");
  await follow; // the hub ends a follow stream with the channel's terminal envelope
  const mine = await alice.readWal(channel.channelId);
  const bobs = await bob.readWal(channel.channelId);
  // the invite (seq 1) is addressed to bob: only he reads it
  assert.deepEqual(
    bobs.map((e) => e.seq),
    bobs.map((_, i) => i + 1),
  );
  assert.equal(bobs[0]?.eventType, "ag2.channel.invite");
  assert.deepEqual(mine, bobs.slice(1));
  assert.deepEqual(followed, mine.map((e) => e.eventType));
  assert.deepEqual(followed.slice(-3), ["ag2.msg.text", "ag2.msg.text", "ag2.channel.closed"]);
  assert.equal(mine.at(-1)?.eventData["reason"], "done here");
  assert.deepEqual((await bob.readWal(channel.channelId, { fromSeq: 2, limit: 1 })).map((e) => e.seq), [2]);
});
