import assert from "node:assert/strict";
import { test } from "node:test";
import { Client, HubRpc, register, registerHuman } from "../src";
import { HubServiceService } from "../src/gen";

// Written by hand because their shape is the bridge's own (scripts/rpc_tables/ts.py HAND_WRITTEN):
// the Connect stream, the registrations, the WAL stream.
const HAND_WRITTEN: Record<string, () => unknown> = {
  connect: () => Client.prototype.connect,
  register: () => register,
  registerHuman: () => registerHuman,
  readWal: () => Client.prototype.readWal,
};

test("every HubService RPC has a client method (unary: the generated HubRpc table)", () => {
  const names = Object.keys(HubServiceService);
  assert.ok(names.length >= 40, `HubService has ${names.length} RPCs; expected the whole service`);
  for (const name of names) {
    const definition = HubServiceService[name as keyof typeof HubServiceService];
    const hand = HAND_WRITTEN[name];
    if (hand !== undefined) {
      assert.equal(typeof hand(), "function", name);
      continue;
    }
    assert.ok(!definition.requestStream && !definition.responseStream, `${name} streams: write it by hand`);
    const method: unknown = (HubRpc.prototype as unknown as Record<string, unknown>)[name];
    assert.equal(typeof method, "function", `HubRpc has no ${name}: run make proto`);
  }
  // and nothing else: the table holds the service's unary RPCs only
  const table = Object.getOwnPropertyNames(HubRpc.prototype).filter((n) => n !== "constructor");
  assert.deepEqual(table.sort(), names.filter((n) => HAND_WRITTEN[n] === undefined).sort());
});
