import assert from "node:assert/strict";
import { test } from "node:test";
import { AgentNetError, Client, isJsonObject, Reason, register } from "../src";
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

test("a task's checkpoint survives a hub restart and is read back by its owner only", async () => {
  const owner = await register(hub.target, { name: "ts-cruncher" });
  const other = await register(hub.target, { name: "ts-cruncher-other" });
  clients.push(owner, other);
  const task = await owner.startTask("crunch");
  assert.equal(await owner.readTaskCheckpoint(task.taskId), undefined);
  await owner.checkpointTask(task.taskId, { step: 1 });
  await owner.checkpointTask(task.taskId, { step: 2, seen: ["a"] });

  await hub.restart("SIGKILL"); // a crash: the checkpoint was stored before the call returned
  const again = Client.fromCredential(hub.target, owner.credential, owner.agentId); // the agent restarted too
  clients.push(again);
  assert.deepEqual(await again.readTaskCheckpoint(task.taskId), { step: 2, seen: ["a"] });
  assert.equal(await refused(other.readTaskCheckpoint(task.taskId)), Reason.PERMISSION_DENIED);
  assert.equal(await refused(other.checkpointTask(task.taskId, { mine: true })), Reason.PERMISSION_DENIED);

  await again.endTask(task.taskId, { result: { sum: 3 } });
  assert.equal(await refused(again.checkpointTask(task.taskId, { late: true })), Reason.FAILED_PRECONDITION);
  assert.deepEqual(await again.readTaskCheckpoint(task.taskId), { step: 2, seen: ["a"] });
});

test("the tasks tool's cancel action and cancelTask follow CancelTask's rules", async () => {
  const owner = await register(hub.target, { name: "ts-task-owner" });
  const stranger = await register(hub.target, { name: "ts-task-stranger" });
  clients.push(owner, stranger);
  const first = await owner.startTask("one");
  assert.equal(await refused(stranger.callTool("tasks", { action: "cancel", task_id: first.taskId })), Reason.PERMISSION_DENIED);
  assert.equal(await refused(stranger.cancelTask(first.taskId, "mine")), Reason.PERMISSION_DENIED);
  const viaTool = await owner.callTool("tasks", { action: "cancel", task_id: first.taskId, reason: "enough" });
  assert.ok(isJsonObject(viaTool) && viaTool["cancel_requested"] === true && viaTool["cancel_reason"] === "enough", JSON.stringify(viaTool));
  const second = await owner.startTask("two");
  assert.equal((await owner.cancelTask(second.taskId, "also")).cancelRequested, true);
});

test("tasks tagged with a capability build the owner's observed track record (describeAgent)", async () => {
  const owner = await register(hub.target, { name: "ts-observed" });
  const peer = await register(hub.target, { name: "ts-observer" });
  clients.push(owner, peer);
  for (const error of ["", "", "boom"]) {
    const task = await owner.startTask("job", { capability: "ts-analysis" });
    await owner.endTask(task.taskId, { error });
  }
  const record = await peer.describeAgent({ name: owner.name });
  const stat = record.resume?.observed["ts-analysis"];
  assert.ok(stat !== undefined, JSON.stringify(record.resume));
  assert.deepEqual([stat.n, stat.completed, stat.failed], [3, 2, 1]);
  assert.ok(stat.lastUpdated !== undefined && record.resume?.lastUpdated !== undefined);
});

// ResumeInit takes the whole Resume, so a resume read back can be sent again as it is
// (observed and lastUpdated included, as the Go bridge sends them); the hub ignores those
// two: a fabricated track record at registration never shows, and setting a resume
// keeps the record the hub built.
test("a resume read back is sent again as it is; the hub keeps its own observed track record", async () => {
  const forged = { n: 9, completed: 9, failed: 0, expired: 0, cancelled: 0, successRate: 1, lastLatencyMs: 5, lastUpdated: new Date() };
  const owner = await register(hub.target, { name: "ts-resume-back" }, { summary: "first", observed: { "ts-forged": forged }, lastUpdated: new Date() });
  const peer = await register(hub.target, { name: "ts-resume-reader" });
  clients.push(owner, peer);
  const fresh = await peer.describeAgent({ agentId: owner.agentId });
  assert.equal(fresh.resume?.summary, "first");
  assert.deepEqual(fresh.resume?.observed, {}, "a client's observed is ignored");
  assert.equal(fresh.resume?.lastUpdated, undefined, "a client's lastUpdated is ignored");

  const task = await owner.startTask("job", { capability: "ts-kept" });
  await owner.endTask(task.taskId);
  const before = await peer.describeAgent({ agentId: owner.agentId });
  assert.ok(before.resume !== undefined && before.resume.observed["ts-kept"]?.n === 1, JSON.stringify(before.resume));
  const changed = await owner.setResume({ ...before.resume, summary: "second", observed: { "ts-kept": forged } });
  assert.equal(changed.resume?.summary, "second");
  const after = await peer.describeAgent({ agentId: owner.agentId });
  assert.equal(after.resume?.summary, "second");
  assert.deepEqual(Object.keys(after.resume?.observed ?? {}), ["ts-kept"]);
  assert.equal(after.resume?.observed["ts-kept"]?.n, 1, "the hub's count, not the one sent");
  assert.ok(after.resume?.lastUpdated !== undefined);
});
