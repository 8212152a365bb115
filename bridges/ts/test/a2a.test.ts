import assert from "node:assert/strict";
import { test } from "node:test";
import {
  type A2ACaller,
  type A2ADispatchInfo,
  a2aDispatchOf,
  a2aReplyData,
  type A2AReplyOptions,
  A2AReplyStatus,
  AgentNetError,
  type Client,
  type InboundEnvelope,
  isJsonObject,
  invokeNested,
  pb,
  Reason,
  register,
} from "../src";
import { useHub } from "../testkit/hub";

const { InvocationStatus } = pb;

const { hub, clients } = useHub();

/** Register an agent in `project` (A2A settings given at Register when `a2a` is set). */
async function agent(name: string, project: string, a2a?: Partial<pb.A2ASettings>): Promise<Client> {
  const client = await register(hub.target, { name, project }, undefined, a2a === undefined ? {} : { a2a });
  clients.push(client);
  return client;
}

type Answer = { text: string } & A2AReplyOptions;

/**
 * Connect `client` and answer every A2A question it receives with
 * `handle(dispatch)` (a thrown error becomes a `failed` reply). Returns the
 * dispatches seen, in order.
 */
async function serve(
  client: Client,
  handle: (dispatch: A2ADispatchInfo, question: InboundEnvelope) => Answer | Promise<Answer>,
): Promise<A2ADispatchInfo[]> {
  await client.connect(); // invites (the consulting channels of the calls) are acked by default
  const seen: A2ADispatchInfo[] = [];
  const loop = (async () => {
    for await (const env of client.envelopes({ autoAck: true })) {
      const dispatch = a2aDispatchOf(env);
      if (dispatch === undefined) continue;
      seen.push(dispatch);
      let answer: Answer;
      try {
        answer = await handle(dispatch, env);
      } catch (err) {
        answer = { text: "", status: A2AReplyStatus.FAILED, error: `handler threw: ${String(err)}` };
      }
      await client.replyA2A(env, answer.text, answer);
    }
  })();
  loop.catch(() => undefined); // ends with the client
  return seen;
}

async function names(caller: Client, filters: Parameters<Client["discoverAgents"]>[0] = {}): Promise<string[]> {
  return (await caller.discoverAgents(filters)).map((a) => a.name);
}

test("A2A discovery: OR within a filter, AND across filters; disabled, other-project and excluded agents are invisible", async () => {
  const P = "ts-disc";
  const caller = await agent("ts-disc-caller", P, { enabled: true });
  const billing = await agent("ts-disc-billing", P);
  const record = await billing.setA2ASettings({
    enabled: true,
    description: "charges and refunds",
    skills: ["payments", "refunds"],
    capabilities: ["stream"],
    inputModes: ["text"],
  });
  assert.equal(record.a2a?.enabled, true);
  assert.deepEqual(record.a2a?.skills, ["payments", "refunds"]);
  await agent("ts-disc-policy", P, { enabled: true, skills: ["Policy-Lookup"], capabilities: ["batch"], inputModes: ["text"] });
  await agent("ts-disc-vision", P, { enabled: true, skills: ["ocr"], capabilities: ["stream"], inputModes: ["image"] });
  const off = await agent("ts-disc-off", P, { enabled: false, skills: ["payments"] });
  const picky = await agent("ts-disc-picky", P, { enabled: true, skills: ["payments"], allowedCallers: ["ts-support-*"] });
  const support = await agent("ts-support-1", P, { enabled: true });
  await agent("ts-elsewhere", "ts-other-project", { enabled: true, skills: ["payments"] });

  // several values of one filter match any of them (case-insensitive)
  assert.deepEqual(await names(caller, { skills: ["refunds", "policy-lookup"] }), ["ts-disc-billing", "ts-disc-policy"]);
  assert.deepEqual(await names(caller, { capabilities: ["stream"] }), ["ts-disc-billing", "ts-disc-vision"]);
  // several filters must all match
  assert.deepEqual(
    await names(caller, { skills: ["refunds", "ocr"], capabilities: ["stream"], inputModes: ["image"] }),
    ["ts-disc-vision"],
  );
  assert.deepEqual(await names(caller, { skills: ["payments"], capabilities: ["batch"] }), []);
  assert.deepEqual(await names(caller, { limit: 2 }), ["ts-disc-billing", "ts-disc-caller"]);

  // visibility: not the disabled agent, not another project's, not one whose allowed_callers exclude the caller
  assert.deepEqual(await names(caller), ["ts-disc-billing", "ts-disc-caller", "ts-disc-policy", "ts-disc-vision", "ts-support-1"]);
  assert.deepEqual(await names(support, { skills: ["payments"] }), ["ts-disc-billing", "ts-disc-picky"], "glob ts-support-* admits it");

  const [found] = await caller.discoverAgents({ skills: ["payments"] });
  assert.deepEqual(
    found && [found.agentId, found.description, found.skills, found.capabilities, found.inputModes],
    [billing.agentId, "charges and refunds", ["payments", "refunds"], ["stream"], ["text"]],
  );

  await assert.rejects(caller.discoverAgents({ projectId: "ts-other-project" }), (err: unknown) =>
    AgentNetError.is(err, Reason.PERMISSION_DENIED),
  );
  for (const target of [off, picky]) {
    await assert.rejects(caller.invokeAgent(target.agentId, "hello"), (err: unknown) => {
      assert.ok(AgentNetError.is(err, Reason.PERMISSION_DENIED));
      assert.equal(err.metadata["agent_id"], target.agentId);
      return true;
    });
  }
  assert.deepEqual(await caller.listExecutions(), [], "refused calls are not recorded");
});

test("A2A invocation: a TS agent answers dispatches — completed, input-required, failed", async () => {
  const P = "ts-call";
  const caller = await agent("ts-call-caller", P, { enabled: true });
  const billing = await agent("ts-call-billing", P, { enabled: true, skills: ["payments"] });
  const seen = await serve(billing, (d): Answer => {
    if (d.message.startsWith("Charge")) return { text: `charged (tenant ${d.customHeaders["x-tenant"] ?? "missing"})` };
    if (d.message.startsWith("Refund")) return { text: "Who approves this refund?", status: A2AReplyStatus.INPUT_REQUIRED };
    return { text: "", status: A2AReplyStatus.FAILED, error: "ledger unavailable" };
  });

  const charged = await caller.invokeAgent(billing.agentId, "Charge the customer", {
    skill: "payments",
    customHeaders: { "x-tenant": "acme" },
    rootSessionId: "ts-call-session",
  });
  assert.deepEqual(
    [charged.status, charged.result, charged.error, charged.rootSessionId],
    [InvocationStatus.INVOCATION_STATUS_COMPLETED, "charged (tenant acme)", "", "ts-call-session"],
  );
  const refund = await caller.invokeAgent(billing.agentId, "Refund order 42");
  assert.deepEqual(
    [refund.status, refund.result, refund.error],
    [InvocationStatus.INVOCATION_STATUS_INPUT_REQUIRED, "Who approves this refund?", ""],
  );
  const failed = await caller.invokeAgent(billing.agentId, "Reconcile the ledger");
  assert.deepEqual(
    [failed.status, failed.result, failed.error],
    [InvocationStatus.INVOCATION_STATUS_FAILED, "", "ledger unavailable"],
  );

  // what the callee saw
  const [first] = seen;
  assert.ok(first !== undefined && seen.length === 3);
  assert.equal(first.message, "Charge the customer");
  assert.equal(first.skill, "payments");
  assert.deepEqual(first.customHeaders, { "x-tenant": "acme" });
  assert.equal(first.executionId, charged.executionId);
  assert.equal(first.rootSessionId, "ts-call-session");
  assert.equal(first.callToken, "", "the hub never writes a call token into the channel");
  assert.equal(first.callTokenExpiresAt, undefined);
  assert.deepEqual(seen[1]?.customHeaders, {});
  assert.equal(seen[1]?.skill, "");

  const executions = await caller.listExecutions();
  assert.deepEqual(
    executions.map((e) => [e.executionId, e.callerId, e.targetId, e.status, e.parentExecutionId]),
    [
      [charged.executionId, caller.agentId, billing.agentId, InvocationStatus.INVOCATION_STATUS_COMPLETED, ""],
      [refund.executionId, caller.agentId, billing.agentId, InvocationStatus.INVOCATION_STATUS_INPUT_REQUIRED, ""],
      [failed.executionId, caller.agentId, billing.agentId, InvocationStatus.INVOCATION_STATUS_FAILED, ""],
    ],
  );
  assert.equal(executions[2]?.error, "ledger unavailable");

  // the call's consulting channel holds the question (a dispatch) and the reply (not one)
  const texts = (await caller.readWal(executions[1]?.channelId ?? "")).filter((e) => e.eventType === "ag2.msg.text");
  assert.deepEqual(
    texts.map((e) => [e.senderId, a2aDispatchOf(e)?.executionId, e.text]),
    [
      [caller.agentId, refund.executionId, "Refund order 42"],
      [billing.agentId, undefined, "Who approves this refund?"],
    ],
  );
  assert.deepEqual(texts[1]?.eventData, { text: "Who approves this refund?", a2a: { status: "input-required" } });
  const question = texts[0]?.eventData["a2a"];
  assert.ok(isJsonObject(question) && !("call_token" in question), "no token in the WAL");
  assert.equal(texts[1]?.causationId, texts[0]?.envelopeId, "replyA2A answers the question envelope");
});

test("A2A: a custom header with the reserved a2a- prefix is refused with INVALID_ARGUMENT naming the key", async () => {
  const P = "ts-hdr";
  const caller = await agent("ts-hdr-caller", P, { enabled: true });
  const target = await agent("ts-hdr-target", P, { enabled: true });
  await assert.rejects(
    caller.invokeAgent(target.agentId, "hello", { customHeaders: { "x-ok": "1", "A2A-Token": "secret" } }),
    (err: unknown) => {
      assert.ok(AgentNetError.is(err, Reason.INVALID_ARGUMENT));
      assert.equal(err.code, 3);
      assert.equal(err.metadata["key"], "A2A-Token");
      assert.match(err.message, /A2A-Token/);
      return true;
    },
  );
  assert.deepEqual(await caller.listExecutions(), [], "nothing was started");
});

test("A2A nested call: the callee's call with its dispatch's token is a child execution in the same root session", async () => {
  const P = "ts-tree";
  const a = await agent("ts-tree-a", P, { enabled: true });
  const b = await agent("ts-tree-b", P, { enabled: true });
  const c = await agent("ts-tree-c", P, { enabled: true });
  const nested: pb.InvokeAgentResponse[] = [];
  const tokens: string[] = [];
  await serve(c, () => ({ text: "leaf" }));
  let callerAsked: unknown;
  await serve(b, async (dispatch) => {
    tokens.push(dispatch.callToken);
    await a.callTokenFor(dispatch.executionId).catch((err: unknown) => (callerAsked = err));
    const answer = await b.invokeNested(dispatch, c.agentId, "what does C say?");
    nested.push(answer);
    tokens.push(dispatch.callToken);
    await b.invokeNested(dispatch, c.agentId, "and again?");
    tokens.push(dispatch.callToken);
    return { text: `C said: ${answer.result}` };
  });

  const top = await a.invokeAgent(b.agentId, "ask C", { rootSessionId: "ts-user-session-1" });
  assert.deepEqual(
    [top.status, top.result, top.rootSessionId],
    [InvocationStatus.INVOCATION_STATUS_COMPLETED, "C said: leaf", "ts-user-session-1"],
  );
  assert.equal(nested[0]?.rootSessionId, "ts-user-session-1");
  assert.equal(tokens[0], "", "the dispatch arrives without a token");
  assert.ok(tokens[1]?.startsWith(`${top.executionId}.`), "invokeNested obtained one from the hub");
  assert.equal(tokens[1], tokens[2], "a valid token is reused");
  assert.ok(AgentNetError.is(callerAsked, Reason.PERMISSION_DENIED), `the caller got the callee's token: ${String(callerAsked)}`);

  const tree = await c.listExecutions({ rootSessionId: "ts-user-session-1" });
  assert.deepEqual(
    tree.map((e) => [e.callerId, e.targetId, e.status]),
    [
      [a.agentId, b.agentId, InvocationStatus.INVOCATION_STATUS_COMPLETED],
      [b.agentId, c.agentId, InvocationStatus.INVOCATION_STATUS_COMPLETED],
      [b.agentId, c.agentId, InvocationStatus.INVOCATION_STATUS_COMPLETED],
    ],
  );
  assert.equal(tree[0]?.parentExecutionId, "");
  assert.equal(tree[0]?.executionId, top.executionId);
  assert.equal(tree[1]?.parentExecutionId, top.executionId);
  assert.equal(tree[1]?.executionId, nested[0]?.executionId);
  assert.deepEqual(new Set(tree.map((e) => e.rootSessionId)), new Set(["ts-user-session-1"]));
  assert.deepEqual(await a.listExecutions({ rootSessionId: "ts-user-session-1", limit: 1 }), tree.slice(0, 1));
  // the call has ended: no token for it any more
  await assert.rejects(b.callTokenFor(top.executionId), (err: unknown) => AgentNetError.is(err, Reason.FAILED_PRECONDITION));
});

test("A2A call tokens: callTokenFor, refreshCallToken, invokeNested retries once with a fresh token on TOKEN_EXPIRED", async () => {
  const P = "ts-token";
  const a = await agent("ts-token-a", P, { enabled: true });
  const b = await agent("ts-token-b", P, { enabled: true });
  const c = await agent("ts-token-c", P, { enabled: true });
  await serve(c, () => ({ text: "from c" }));

  // b's client, except that the hub's first answer is a TOKEN_EXPIRED refusal
  const used: string[] = [];
  const refreshed: string[] = [];
  const expiredOnce: A2ACaller = {
    async invokeAgent(agentId, message, options) {
      used.push(options?.callToken ?? "");
      if (used.length === 1) {
        throw new AgentNetError({ code: 16, reason: Reason.TOKEN_EXPIRED, message: "your call token has expired" });
      }
      return b.invokeAgent(agentId, message, options);
    },
    async callTokenFor(executionId, call) {
      refreshed.push(executionId);
      return b.callTokenFor(executionId, call);
    },
  };
  let original = "";
  let viaRefresh: pb.RefreshCallTokenResponse | undefined;
  let afterCall: A2ADispatchInfo | undefined;
  let nested: pb.InvokeAgentResponse | undefined;
  let forged: unknown;
  await serve(b, async (dispatch) => {
    original = (await b.callTokenFor(dispatch.executionId)).callToken;
    viaRefresh = await b.refreshCallToken(original);
    dispatch.callToken = original;
    nested = await invokeNested(expiredOnce, dispatch, c.agentId, "nested");
    afterCall = { ...dispatch };
    // other refusals are not retried
    await invokeNested(expiredOnce, { ...dispatch, callToken: `${dispatch.executionId}.forged` }, c.agentId, "x").catch(
      (err: unknown) => (forged = err),
    );
    return { text: "done" };
  });

  const top = await a.invokeAgent(b.agentId, "work");
  assert.equal(top.status, InvocationStatus.INVOCATION_STATUS_COMPLETED);

  assert.ok(viaRefresh !== undefined && viaRefresh.callToken.startsWith(`${top.executionId}.`));
  assert.notEqual(viaRefresh.callToken, original);
  assert.ok(viaRefresh.expiresAt instanceof Date);

  assert.deepEqual(refreshed, [top.executionId], "one fresh token, for the dispatch's execution");
  assert.equal(used.length, 3);
  assert.equal(used[0], original);
  assert.ok(afterCall !== undefined && afterCall.callToken !== original && afterCall.callToken.startsWith(`${top.executionId}.`));
  assert.equal(used[1], afterCall.callToken, "the retry used the fresh token");
  assert.ok(afterCall.callTokenExpiresAt instanceof Date, "the dispatch remembers the fresh token's expiry");
  assert.equal(nested?.status, InvocationStatus.INVOCATION_STATUS_COMPLETED);
  assert.equal(nested?.result, "from c");
  assert.ok(AgentNetError.is(forged, Reason.UNAUTHENTICATED), `forged token: ${String(forged)}`);

  const tree = await a.listExecutions({ rootSessionId: top.rootSessionId });
  assert.deepEqual(
    tree.map((e) => e.parentExecutionId),
    ["", top.executionId],
  );
  // once the call has ended its tokens are worthless
  await assert.rejects(b.refreshCallToken(afterCall.callToken), (err: unknown) => AgentNetError.is(err, Reason.UNAUTHENTICATED));
});

test("invokeNested gives up after one refresh when the fresh token is refused too", async () => {
  const calls: string[] = [];
  const alwaysExpired: A2ACaller = {
    async invokeAgent(_agentId, _message, options) {
      calls.push(`invoke ${options?.callToken}`);
      throw new AgentNetError({ code: 16, reason: Reason.TOKEN_EXPIRED, message: "expired" });
    },
    async callTokenFor(executionId) {
      calls.push(`token for ${executionId}`);
      return { callToken: "e1.fresh", expiresAt: undefined };
    },
  };
  const dispatch: A2ADispatchInfo = {
    executionId: "e1",
    rootSessionId: "r1",
    message: "m",
    skill: "",
    customHeaders: {},
    callToken: "e1.old",
    callTokenExpiresAt: undefined,
  };
  await assert.rejects(invokeNested(alwaysExpired, dispatch, "x", "hi"), (err: unknown) =>
    AgentNetError.is(err, Reason.TOKEN_EXPIRED),
  );
  assert.deepEqual(calls, ["invoke e1.old", "token for e1", "invoke e1.fresh"]);
  assert.equal(dispatch.callToken, "e1.fresh");
});

test("a2aReplyData builds the three outcomes", () => {
  assert.deepEqual(a2aReplyData("the answer"), { text: "the answer" });
  assert.deepEqual(a2aReplyData("which one?", { status: A2AReplyStatus.INPUT_REQUIRED }), {
    text: "which one?",
    a2a: { status: "input-required" },
  });
  assert.deepEqual(a2aReplyData("cannot", { status: A2AReplyStatus.FAILED, error: "ledger down" }), {
    text: "cannot",
    a2a: { status: "failed", error: "ledger down" },
  });
  assert.deepEqual(a2aReplyData("cannot", { status: A2AReplyStatus.FAILED }), { text: "cannot", a2a: { status: "failed" } });
});
