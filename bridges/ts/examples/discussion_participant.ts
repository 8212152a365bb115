/**
 * A discussion participant: it accepts discussion invites (the bridge acks them)
 * and, whenever the hub expects it to speak, posts one deterministic line
 *
 *     ts-agent round N: <name> heard "<what the previous speaker said>"
 *
 * After every text (and after `ag2.channel.opened`: an initiator without a seed
 * message speaks first) it asks the hub whose turn it is
 * (DescribeChannel.expectedNext) and answers when it is expected and the
 * envelope in hand is the channel's latest (`lastSeq`), so it never posts out of
 * turn and each line answers the text right before it. (A participant never
 * receives its own posts, so it cannot count turns from deliveries alone.)
 *
 * Run against a hub:
 *
 *     npm run build
 *     node dist/bridges/ts/examples/discussion_participant.js --hub 127.0.0.1:7600 --name ts-agent \
 *         [--cursor-file ./ts-agent.cursors.json] [--channels 1]
 *
 * It registers `--name` (kind REMOTE_AGENT), prints its agent id, and exits after
 * taking part in `--channels` discussions (default: runs until SIGINT).
 */
import { type Client, EventType, type InboundEnvelope, JsonFileCursorStore, register } from "../src";

/** Options of {@link runDiscussionParticipant}. */
export interface ParticipantOptions {
  /** Take part in this channel only (default: every discussion this client is invited to or opened). */
  channelId?: string;
  /** Return after this many discussions ended (default: run until the client closes). */
  channels?: number;
  /** Called with every line posted. */
  onLine?: (line: string, env: InboundEnvelope) => void;
}

/** What a participant did in one channel. */
export interface ChannelOutcome {
  /** The lines it posted, in order. */
  lines: string[];
  /** `reason` of the closing envelope. */
  closeReason: string;
}

/** The deterministic line for turn `turns` (0-based count of turns already taken) of an n-party discussion. */
export function lineFor(name: string, turns: number, participants: number, heard: string | undefined): string {
  const round = Math.floor(turns / Math.max(participants, 1)) + 1;
  const quote = heard === undefined ? "the opening" : `"${heard.length > 60 ? `${heard.slice(0, 57)}...` : heard}"`;
  return `ts-agent round ${round}: ${name} heard ${quote}`;
}

/**
 * Take part in discussions until `options.channels` of them ended (or the
 * client closed). The client must be connected (or connectable with defaults).
 * Returns what happened per channel id.
 */
export async function runDiscussionParticipant(
  client: Client,
  options: ParticipantOptions = {},
): Promise<Map<string, ChannelOutcome>> {
  if (client.connectionState !== "connected") await client.connect();
  const outcomes = new Map<string, ChannelOutcome>();
  const discussions = new Set<string>();
  let ended = 0;
  const name = client.name || client.agentId;
  const mine = (channelId: string): boolean => options.channelId === undefined || options.channelId === channelId;

  for await (const env of client.envelopes({ autoAck: true })) {
    if (!mine(env.channelId)) continue;
    switch (env.eventType) {
      case EventType.CHANNEL_INVITE:
        if (env.eventData["type"] === "discussion") discussions.add(env.channelId);
        break;
      case EventType.CHANNEL_OPENED:
      case EventType.TEXT:
      case EventType.PACKET: {
        const described = await client.describeChannel(env.channelId);
        if (described.channel.type !== "discussion") break;
        discussions.add(env.channelId);
        if (!described.expectedNext.includes(client.agentId)) break;
        // Answer only the latest envelope of the channel. When the hub is already
        // ahead (the seed text follows `opened`; a newer text is on its way) the
        // newer envelope triggers the answer instead, so each line answers the
        // text right before it.
        if (described.channel.lastSeq !== env.seq) break;
        const turns = typeof described.adapterState["turns"] === "number" ? described.adapterState["turns"] : 0;
        const line = lineFor(name, turns, described.channel.participants.length, env.text);
        await client.postText(env.channelId, line, { causationId: env.envelopeId });
        const outcome = outcomes.get(env.channelId) ?? { lines: [], closeReason: "" };
        outcome.lines.push(line);
        outcomes.set(env.channelId, outcome);
        options.onLine?.(line, env);
        break;
      }
      case EventType.CHANNEL_CLOSED:
      case EventType.CHANNEL_EXPIRED: {
        if (!discussions.has(env.channelId)) break;
        const outcome = outcomes.get(env.channelId) ?? { lines: [], closeReason: "" };
        outcome.closeReason = typeof env.eventData["reason"] === "string" ? env.eventData["reason"] : "";
        outcomes.set(env.channelId, outcome);
        ended += 1;
        if (options.channels !== undefined && ended >= options.channels) {
          env.ack(); // the loop exits before autoAck would ack it
          return outcomes;
        }
        break;
      }
      default:
        break;
    }
  }
  return outcomes;
}

function arg(flag: string): string | undefined {
  const i = process.argv.indexOf(flag);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

async function main(): Promise<void> {
  const hub = arg("--hub") ?? "127.0.0.1:7600";
  const name = arg("--name") ?? `ts-agent-${process.pid}`;
  const channels = arg("--channels");
  const cursorFile = arg("--cursor-file");
  const client = await register(hub, { name, description: "TypeScript discussion participant (example)" });
  console.log(`registered ${name} as ${client.agentId}`);
  const stop = (): void => void client.close();
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  try {
    await client.connect({
      cursorStore: cursorFile === undefined ? undefined : new JsonFileCursorStore(cursorFile),
      onError: (err) => console.error(`bridge: ${err.reason}: ${err.message}`),
    });
    const outcomes = await runDiscussionParticipant(client, {
      channels: channels === undefined ? undefined : Number(channels),
      onLine: (line) => console.log(line),
    });
    for (const [channelId, outcome] of outcomes) {
      console.log(`channel ${channelId} closed (${outcome.closeReason}) after ${outcome.lines.length} lines of mine`);
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
