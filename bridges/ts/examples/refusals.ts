/**
 * What a bridge gets back when the hub refuses a post. It registers `--name`,
 * connects, and in each discussion it is invited to (once the channel is
 * opened) posts twice in a way the hub refuses:
 *
 * * as someone else (`senderId` = the channel's initiator) → `PERMISSION_DENIED`;
 * * out of turn (when the hub expects another speaker) → `NOT_YOUR_TURN`.
 *
 * Each refusal is printed as one JSON line
 * `{"event":"refused","case":...,"code":7,"reason":"PERMISSION_DENIED","message":...,"metadata":{...}}`;
 * `{"event":"ready","agent_id":...}` comes first. It exits after `--channels`
 * discussions (default 1) were handled, or on SIGINT/SIGTERM.
 *
 *     npm run build
 *     node dist/bridges/ts/examples/refusals.js --hub 127.0.0.1:7600 --name ts-refusals
 */
import { AgentNetError, type Client, EventType, register } from "../src";

function emit(fields: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(fields)}\n`);
}

function emitRefusal(what: string, channelId: string, err: unknown): void {
  if (!(err instanceof AgentNetError)) throw err;
  emit({
    event: "refused",
    case: what,
    channel: channelId,
    code: err.code,
    reason: err.reason,
    message: err.message,
    metadata: err.metadata,
  });
}

/** Post as the initiator and (when not expected) out of turn in `channelId`; print the refusals. */
export async function demoRefusals(client: Client, channelId: string): Promise<void> {
  const described = await client.describeChannel(channelId);
  const initiator = described.channel.participants[0]?.agentId ?? "";
  try {
    await client.postText(channelId, "posted in someone else's name", { senderId: initiator });
    emit({ event: "admitted", case: "spoofed_sender", channel: channelId });
  } catch (err) {
    emitRefusal("spoofed_sender", channelId, err);
  }
  if (!described.expectedNext.includes(client.agentId)) {
    try {
      await client.postText(channelId, "speaking out of turn");
      emit({ event: "admitted", case: "out_of_turn", channel: channelId });
    } catch (err) {
      emitRefusal("out_of_turn", channelId, err);
    }
  }
}

function arg(flag: string): string | undefined {
  const i = process.argv.indexOf(flag);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

async function main(): Promise<void> {
  const hub = arg("--hub") ?? "127.0.0.1:7600";
  const name = arg("--name") ?? `ts-refusals-${process.pid}`;
  const channels = Number(arg("--channels") ?? "1");
  const client = await register(hub, { name, description: "TypeScript refusal demo (example)" });
  const stop = (): void => void client.close();
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  try {
    await client.connect({ onError: (err) => console.error(`bridge: ${err.reason}: ${err.message}`) });
    emit({ event: "ready", agent_id: client.agentId, name });
    let handled = 0;
    for await (const env of client.envelopes({ autoAck: true })) {
      if (env.eventType !== EventType.CHANNEL_OPENED) continue;
      const described = await client.describeChannel(env.channelId);
      if (described.channel.type !== "discussion") continue;
      await demoRefusals(client, env.channelId);
      handled += 1;
      if (handled >= channels) {
        env.ack(); // the loop exits before autoAck would ack it
        break;
      }
    }
  } finally {
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
    await client.close();
  }
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
