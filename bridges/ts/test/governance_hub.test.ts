/**
 * End to end: a real hub started with `--policy` (a file written here; the schema is
 * docs/governance.md), and each governance refusal reaching the bridge as its typed error.
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import {
  AgentNetError,
  Client,
  EventType,
  InboxFullError,
  LimitExceededError,
  RateLimitedError,
  Reason,
  register,
  RuleDeniedError,
} from "../src";
import { useHub } from "../testkit/hub";
import { Collector } from "../testkit/wait";

/** One rule per refusal, each picking its identities by a name prefix. */
const POLICY = `version: 1
rules:
  - id: slow-posters
    match: {names: ["gov-slow-*"]}
    rule:
      rate: {posts_per_second: 1, burst: 1}
  - id: shy-joiners
    match: {names: ["gov-shy-*"]}
    rule:
      rate: {posts_per_second: 0.5, burst: 1}
  - id: no-discussions
    match: {names: ["gov-nodisc-*"]}
    rule:
      access: {channel_types: [consulting, conversation]}
  - id: one-channel
    match: {names: ["gov-single-*"]}
    rule:
      limits: {max_open_channels: 1}
  - id: slow-readers
    match: {names: ["gov-reader-*"]}
    rule:
      inbox: {max_pending: 3}
`;
const policyPath = join(mkdtempSync(join(tmpdir(), "agentnet-ts-policy-")), "policy.yaml");
writeFileSync(policyPath, POLICY);

const { hub, clients } = useHub(["--policy", policyPath]);
const OPENED = 2;

/** Register a connected client; `autoAck` drains and acks its deliveries in the background. */
async function agent(name: string, autoAck = true): Promise<Client> {
  const c = await register(hub.target, { name });
  clients.push(c);
  await c.connect();
  if (autoAck) new Collector(c, true);
  return c;
}

/** Open an OPENED conversation from `from` to `target`. */
async function conversation(from: Client, target: string): Promise<string> {
  const opened = await from.openChannel({ type: "conversation", targets: [target], waitUntilOpened: true });
  assert.equal(opened.channel.state, OPENED, `conversation with ${target}`);
  return opened.channel.channelId;
}

/** Reject-value of `promise` (fails when it resolves). */
async function refusal(promise: Promise<unknown>, what: string): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  assert.fail(`${what} was admitted`);
}

/** Post until the hub refuses with RATE_LIMITED (a burst of 1 empties at once, unless the machine is very slow). */
async function postUntilRateLimited(c: Client, channelId: string): Promise<RateLimitedError> {
  for (let i = 0; i < 20; i++) {
    try {
      await c.postText(channelId, `quick ${i}`);
    } catch (err) {
      assert.ok(err instanceof RateLimitedError, `post ${i} refused with ${String(err)}, want a RateLimitedError`);
      return err;
    }
  }
  assert.fail("20 quick posts were never rate limited");
}

function checkRateLimited(err: RateLimitedError): void {
  assert.ok(err instanceof AgentNetError && AgentNetError.is(err, Reason.RATE_LIMITED));
  assert.equal(err.codeName, "RESOURCE_EXHAUSTED");
  assert.ok(err.retryAfterSeconds > 0 && err.retryAfterSeconds <= 1, `retryAfterSeconds ${err.retryAfterSeconds}`);
  assert.equal(err.metadata["rule"], "slow-posters");
  assert.equal(err.metadata["posts_per_second"], "1");
  assert.equal(err.metadata["burst"], "1");
}

/** Wait the refusal's retry-after and post again, while the hub keeps asking to wait. */
async function postAfterRetryAfter(c: Client, channelId: string, refused: RateLimitedError): Promise<void> {
  for (let err = refused; ; ) {
    await new Promise((resolve) => setTimeout(resolve, err.retryAfterSeconds * 1000));
    try {
      const env = await c.postText(channelId, "after the retry-after");
      assert.ok(env.seq > 0);
      return;
    } catch (e) {
      assert.ok(e instanceof RateLimitedError && e.retryAfterSeconds > 0, `post after waiting: ${String(e)}`);
      err = e;
    }
  }
}

test("RATE_LIMITED is a RateLimitedError with the retry-after, on the stream and over PostEnvelope", async () => {
  const alice = await agent("gov-slow-alice");
  await agent("gov-bob");
  const channelId = await conversation(alice, "gov-bob");

  assert.equal(alice.connectionState, "connected");
  const overStream = await postUntilRateLimited(alice, channelId);
  checkRateLimited(overStream);
  await postAfterRetryAfter(alice, channelId, overStream);

  // The same identity without a stream: PostEnvelope's status.
  const unary = Client.fromCredential(hub.target, alice.credential, alice.agentId);
  clients.push(unary);
  const overUnary = await postUntilRateLimited(unary, channelId);
  checkRateLimited(overUnary);
  await postAfterRetryAfter(unary, channelId, overUnary);
});

test("an identity whose bucket is empty when invited still joins: the bridge answers again after the retry-after", async () => {
  const carol = await agent("gov-carol");
  const errors: AgentNetError[] = [];
  const dan = await register(hub.target, { name: "gov-shy-dan" });
  clients.push(dan);
  await dan.connect({ onError: (err) => errors.push(err) });
  new Collector(dan, true);
  // dan's answer to the first invite takes his only token (one per 2 s) ...
  await conversation(carol, "gov-shy-dan");
  // ... so his answer to the second is refused with RATE_LIMITED at first.
  const second = await carol.openChannel({
    type: "conversation",
    targets: ["gov-shy-dan"],
    waitUntilOpened: true,
    inviteAckTimeoutSeconds: 20,
  });
  assert.equal(second.channel.state, OPENED, `close reason ${second.channel.closeReason}`);
  assert.deepEqual(errors, []);
});

test("RULE_DENIED is a RuleDeniedError naming the rule and the check", async () => {
  const alice = await agent("gov-nodisc-alice");
  await agent("gov-bob2");
  await agent("gov-carol2");
  const err = await refusal(alice.openChannel({ type: "discussion", targets: ["gov-bob2", "gov-carol2"] }), "a discussion");
  assert.ok(err instanceof RuleDeniedError, String(err));
  assert.deepEqual([err.rule, err.check, err.codeName], ["no-discussions", "access.channel_types", "PERMISSION_DENIED"]);
  assert.equal(err.metadata["channel_type"], "discussion");
  await conversation(alice, "gov-bob2"); // a type the rule allows
});

test("LIMIT_EXCEEDED is a LimitExceededError naming the rule and the limit; closing frees the slot", async () => {
  const alice = await agent("gov-single-alice");
  await agent("gov-bob3");
  await agent("gov-carol3");
  const first = await conversation(alice, "gov-bob3");
  const err = await refusal(alice.openChannel({ type: "conversation", targets: ["gov-carol3"] }), "a second channel");
  assert.ok(err instanceof LimitExceededError, String(err));
  assert.deepEqual([err.rule, err.limit, err.codeName], ["one-channel", "1", "RESOURCE_EXHAUSTED"]);
  assert.equal(err.metadata["check"], "limits.max_open_channels");
  await alice.closeChannel(first, "done");
  await conversation(alice, "gov-carol3");
});

test("INBOX_FULL is an InboxFullError naming the recipient; the recipient's answer, not its acks, lets posts through again", async () => {
  const alice = await agent("gov-alice4");
  const rita = await agent("gov-reader-rita", false); // acks nothing by itself
  const channelId = await conversation(alice, "gov-reader-rita");

  let full: InboxFullError | undefined;
  let admitted = 0;
  for (let i = 0; full === undefined; i++) {
    assert.ok(i < 10, "10 posts to a reader capped at 3 pending were all admitted");
    try {
      await alice.postText(channelId, `unread ${i}`);
      admitted += 1;
    } catch (err) {
      assert.ok(err instanceof InboxFullError, `post ${i}: ${String(err)}`);
      full = err;
    }
  }
  assert.ok(admitted <= 3, `${admitted} posts admitted to an inbox capped at 3`);
  assert.equal(full.recipient, rita.agentId);
  assert.equal(full.codeName, "RESOURCE_EXHAUSTED");
  assert.deepEqual([full.metadata["recipient_name"], full.metadata["rule"], full.metadata["limit"]], ["gov-reader-rita", "slow-readers", "3"]);
  // The refusal admitted nothing.
  const texts = (await alice.readWal(channelId)).filter((e) => e.eventType === EventType.TEXT);
  assert.equal(texts.length, admitted);

  // rita reads and acks everything: read is not answered, the inbox stays full. Her answer frees it.
  const reader = new Collector(rita, true);
  await reader.waitFor((e) => e.text === `unread ${admitted - 1}`, "the last admitted text");
  await assert.rejects(alice.postText(channelId, "read, not answered"), (err: unknown) => err instanceof InboxFullError);
  await rita.postText(channelId, "answered");
  await alice.postText(channelId, "answered now");
});
