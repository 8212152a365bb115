import assert from "node:assert/strict";
import { test } from "node:test";
import { Metadata, status } from "@grpc/grpc-js";
import { BinaryWriter } from "@bufbuild/protobuf/wire";
import { AgentNetError, decodeErrorInfo, decodeRpcStatus, ERROR_INFO_TYPE_URL, findErrorInfo, pb, Reason } from "../src";

// google.rpc.Status as the Python hub serialises it (agentsdk.errors.error_status) for
// NotYourTurn("it is bob's turn — wait", metadata={"channel_id": "ch-1", "expected": "bob"}).
const PYTHON_STATUS_HEX =
  "08091219697420697320626f622773207475726e20e2809420776169741a6d0a28747970652e676f6f676c65617069732e636f6d2f" +
  "676f6f676c652e7270632e4572726f72496e666f12410a0d4e4f545f594f55525f5455524e120b6167656e746e65742e76311a120a" +
  "0a6368616e6e656c5f6964120463682d311a0f0a0865787065637465641203626f62";

function encodeErrorInfo(reason: string, domain: string, metadata: Record<string, string>, extra = false): Uint8Array {
  const w = new BinaryWriter();
  w.uint32((1 << 3) | 2).string(reason);
  w.uint32((2 << 3) | 2).string(domain);
  for (const [k, v] of Object.entries(metadata)) {
    w.uint32((3 << 3) | 2).fork();
    w.uint32((1 << 3) | 2).string(k);
    w.uint32((2 << 3) | 2).string(v);
    w.join();
  }
  if (extra) w.uint32((9 << 3) | 0).uint32(42); // an unknown varint field
  return w.finish();
}

function encodeStatus(code: number, message: string, details: Array<[string, Uint8Array]>): Uint8Array {
  const w = new BinaryWriter();
  w.uint32((1 << 3) | 0).int32(code);
  w.uint32((2 << 3) | 2).string(message);
  for (const [typeUrl, value] of details) {
    w.uint32((3 << 3) | 2).fork();
    w.uint32((1 << 3) | 2).string(typeUrl);
    w.uint32((2 << 3) | 2).bytes(value);
    w.join();
  }
  w.uint32((7 << 3) | 2).string("unknown length-delimited field");
  return w.finish();
}

test("decodes the Python hub's grpc-status-details-bin bytes", () => {
  const st = decodeRpcStatus(Buffer.from(PYTHON_STATUS_HEX, "hex"));
  assert.equal(st.code, 9);
  assert.equal(st.message, "it is bob's turn — wait");
  assert.equal(st.details.length, 1);
  assert.equal(st.details[0]?.typeUrl, ERROR_INFO_TYPE_URL);
  assert.deepEqual(findErrorInfo(st), {
    reason: "NOT_YOUR_TURN",
    domain: "agentnet.v1",
    metadata: { channel_id: "ch-1", expected: "bob" },
  });
});

test("skips unknown fields and non-ErrorInfo details", () => {
  const bytes = encodeStatus(7, "nope", [
    ["type.googleapis.com/google.rpc.DebugInfo", new Uint8Array([10, 1, 120])],
    [ERROR_INFO_TYPE_URL, encodeErrorInfo("PERMISSION_DENIED", "agentnet.v1", { a: "1", b: "" }, true)],
  ]);
  const st = decodeRpcStatus(bytes);
  assert.equal(st.code, 7);
  assert.equal(st.details.length, 2);
  assert.deepEqual(findErrorInfo(st), { reason: "PERMISSION_DENIED", domain: "agentnet.v1", metadata: { a: "1", b: "" } });
  assert.deepEqual(decodeErrorInfo(new Uint8Array(0)), { reason: "", domain: "", metadata: {} });
  assert.equal(findErrorInfo(decodeRpcStatus(encodeStatus(5, "x", []))), undefined);
  assert.throws(() => decodeRpcStatus(new Uint8Array([0x12, 0x05, 0x61])), "truncated bytes throw");
});

function serviceError(code: number, details: string, trailer?: Uint8Array): Error & { code: number; details: string; metadata: Metadata } {
  const metadata = new Metadata();
  if (trailer !== undefined) metadata.set("grpc-status-details-bin", Buffer.from(trailer));
  return Object.assign(new Error(`${code} ${status[code]}: ${details}`), { code, details, metadata });
}

test("AgentNetError.fromServiceError uses the ErrorInfo, else the code name", () => {
  const typed = AgentNetError.fromServiceError(serviceError(9, "it is bob's turn — wait", Buffer.from(PYTHON_STATUS_HEX, "hex")));
  assert.ok(typed instanceof AgentNetError && typed instanceof Error);
  assert.equal(typed.reason, Reason.NOT_YOUR_TURN);
  assert.equal(typed.code, 9);
  assert.equal(typed.codeName, "FAILED_PRECONDITION");
  assert.equal(typed.domain, "agentnet.v1");
  assert.equal(typed.message, "it is bob's turn — wait");
  assert.deepEqual({ ...typed.metadata }, { channel_id: "ch-1", expected: "bob" });

  const plain = AgentNetError.fromServiceError(serviceError(14, "connect ECONNREFUSED"));
  assert.equal(plain.reason, "UNAVAILABLE");
  assert.equal(plain.domain, "");
  assert.equal(plain.message, "connect ECONNREFUSED");

  const garbage = AgentNetError.fromServiceError(serviceError(13, "boom", new Uint8Array([0xff, 0xff])));
  assert.equal(garbage.reason, "INTERNAL");

  const other = AgentNetError.fromServiceError(new TypeError("bad"));
  assert.equal(other.reason, "UNKNOWN");
  assert.equal(other.message, "bad");
});

test("AgentNetError.fromErrorDetail mirrors an in-stream PostResult.error", () => {
  const detail: pb.ErrorDetail = { code: 9, reason: "CHANNEL_CLOSED", message: "closed", metadata: { channel_id: "c" } };
  const err = AgentNetError.fromErrorDetail(detail);
  assert.equal(err.reason, Reason.CHANNEL_CLOSED);
  assert.equal(err.code, 9);
  assert.equal(err.metadata["channel_id"], "c");
  assert.ok(AgentNetError.is(err, "CHANNEL_CLOSED"));
  assert.ok(!AgentNetError.is(err, "NOT_YOUR_TURN"));
});
