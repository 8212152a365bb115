// A project of its own, outside the agent-network repository: it depends on the
// packed TypeScript bridge (`npm install ./agent-network-bridge-ts-<version>.tgz`)
// and imports it by package name. It registers, prints {"event":"ready",...},
// answers the first text a peer sends with "outside-ts: <text>" and exits.
import { type Client, EventType, register } from "@agent-network/bridge-ts";

async function main(hub: string, name: string): Promise<void> {
  const client: Client = await register(hub, { name });
  await client.connect();
  console.log(JSON.stringify({ event: "ready", agent_id: client.agentId }));
  for await (const env of client.envelopes({ autoAck: true })) {
    if (env.eventType === EventType.TEXT && env.senderId !== client.agentId && env.text !== undefined) {
      await client.postText(env.channelId, `outside-ts: ${env.text}`, { causationId: env.envelopeId });
      break;
    }
  }
  await client.close();
}

const [hub = "127.0.0.1:50051", name = "outside-ts"] = process.argv.slice(2);
main(hub, name).catch((err: unknown) => {
  console.error("outside-agent:", err);
  process.exit(1);
});
