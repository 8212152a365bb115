import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { test } from "node:test";
import { Metadata } from "@grpc/grpc-js";
import {
  AgentNetError,
  InboxFullError,
  LimitExceededError,
  pb,
  RateLimitedError,
  Reason,
  RuleDeniedError,
} from "../src";
import { pythonPath, repoRoot } from "../testkit/hub";

/** The grpc-status-details-bin of each governance refusal, built by the hub's own error code. */
const HUB_STATUSES = `
import base64
from netkernel import errors as e
for err in (
    e.RateLimited("slow down", metadata={"retry_after_seconds": "0.25", "rule": "chatty"}),
    e.InboxFull("bob's inbox is full", metadata={"recipient": "agent-bob"}),
    e.RuleDenied("bots may not open workflows", metadata={"rule": "bots", "check": "access.channel_types"}),
    e.LimitExceeded("2 open channels at most", metadata={"rule": "bots", "limit": "2"}),
):
    st = e.error_status(err)
    print(st.code.value[0], base64.b64encode(dict(st.trailing_metadata)["grpc-status-details-bin"]).decode())
`;

function fromHub(): AgentNetError[] {
  const out = execFileSync(pythonPath(), ["-c", HUB_STATUSES], { cwd: repoRoot(), encoding: "utf8" });
  return out
    .trim()
    .split("\n")
    .map((line) => {
      const [code, b64] = line.split(" ");
      const metadata = new Metadata();
      metadata.set("grpc-status-details-bin", Buffer.from(b64 ?? "", "base64"));
      const err = Object.assign(new Error("status"), { code: Number(code), details: "status", metadata });
      return AgentNetError.fromServiceError(err);
    });
}

test("governance refusals from the hub's status trailer are typed errors with their metadata", () => {
  const [rateLimited, inboxFull, ruleDenied, limitExceeded, ...rest] = fromHub();
  assert.equal(rest.length, 0);

  assert.ok(rateLimited instanceof RateLimitedError && rateLimited instanceof AgentNetError);
  assert.equal(rateLimited.retryAfterSeconds, 0.25);
  assert.equal(rateLimited.reason, Reason.RATE_LIMITED);
  assert.equal(rateLimited.codeName, "RESOURCE_EXHAUSTED");
  assert.equal(rateLimited.message, "slow down");
  assert.equal(rateLimited.name, "RateLimitedError");

  assert.ok(inboxFull instanceof InboxFullError);
  assert.equal(inboxFull.recipient, "agent-bob");
  assert.equal(inboxFull.codeName, "RESOURCE_EXHAUSTED");

  assert.ok(ruleDenied instanceof RuleDeniedError);
  assert.deepEqual([ruleDenied.rule, ruleDenied.check, ruleDenied.codeName], ["bots", "access.channel_types", "PERMISSION_DENIED"]);
  assert.ok(AgentNetError.is(ruleDenied, Reason.RULE_DENIED));

  assert.ok(limitExceeded instanceof LimitExceededError);
  assert.deepEqual([limitExceeded.rule, limitExceeded.limit, limitExceeded.codeName], ["bots", "2", "RESOURCE_EXHAUSTED"]);

  // each refusal is only its own class
  const classes = [RateLimitedError, InboxFullError, RuleDeniedError, LimitExceededError];
  [rateLimited, inboxFull, ruleDenied, limitExceeded].forEach((err, i) =>
    classes.forEach((cls, j) => assert.equal(err instanceof cls, i === j, `refusal ${i} instanceof class ${j}`)),
  );
});

test("in-stream refusals are typed too; missing or malformed retry hints read as 0", () => {
  const detail: pb.ErrorDetail = { code: 8, reason: "RATE_LIMITED", message: "slow", metadata: { retry_after_seconds: "1.5" } };
  const err = AgentNetError.fromErrorDetail(detail);
  assert.ok(err instanceof RateLimitedError);
  assert.equal(err.retryAfterSeconds, 1.5);
  for (const hint of [undefined, "", "soon", "-1", "NaN", "Infinity"]) {
    const metadata: Record<string, string> = hint === undefined ? {} : { retry_after_seconds: hint };
    const e = AgentNetError.create({ code: 8, reason: Reason.RATE_LIMITED, message: "slow", metadata });
    assert.ok(e instanceof RateLimitedError);
    assert.equal(e.retryAfterSeconds, 0, `hint ${String(hint)}`);
  }
  // a slow consumer's INBOX_FULL has no recipient
  const slow = AgentNetError.fromErrorDetail({ code: 8, reason: "INBOX_FULL", message: "slow", metadata: { cause: "slow_consumer" } });
  assert.ok(slow instanceof InboxFullError);
  assert.equal(slow.recipient, "");
  // other reasons stay plain
  const plain = AgentNetError.fromErrorDetail({ code: 9, reason: "NOT_YOUR_TURN", message: "wait", metadata: {} });
  assert.equal(plain.constructor, AgentNetError);
});

test("Reason has one constant per ErrorReason value, spelled as the enum without its prefix", () => {
  const names = Object.keys(pb.ErrorReason)
    .filter((k) => Number.isNaN(Number(k)) && k !== "ERROR_REASON_UNSPECIFIED" && k !== "UNRECOGNIZED")
    .map((k) => k.replace(/^ERROR_REASON_/, ""))
    .sort();
  assert.deepEqual(Object.values(Reason).sort(), names);
  assert.deepEqual(Object.keys(Reason).sort(), names);
});
