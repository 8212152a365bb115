/**
 * Benchmarks of the TypeScript bridge against a real hub (`python -m hubsvc`, durable
 * SQLite WAL): the workloads of bench/hub_bench.py with the lean Python client — the
 * request/reply round trip between two agents of a conversation (p50/p99), one-way
 * throughput in a conversation (`--window` posts in flight) and 8-way fan-out of a
 * custom event type in a discussion of 9. Each workload gets a fresh hub; setup
 * (hub, registration, channel) is not timed. Not a test: `npm run bench` runs it
 * (`make bench-bridges`), `npm test` only compiles it.
 *
 * Flags: `--iterations N` (round trips, default 2000, after min(200, N) warm-up ones),
 * `--count N` (throughput posts, default 20000; fan-out posts N / 4), `--window N`
 * (default 512), `--json` (print the figures as JSON too).
 */
import { performance } from "node:perf_hooks";
import { type Client, EventType, type InboundEnvelope, register } from "../src";
import { startDirectHub } from "../testkit/hub";

/** The fan-out workload's custom event type. */
const TICK = "bench.tick";

interface Args {
  iterations: number;
  count: number;
  window: number;
  json: boolean;
}

function parseArgs(argv: readonly string[]): Args {
  const args: Args = { iterations: 2000, count: 20000, window: 512, json: false };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    if (flag === "--json") {
      args.json = true;
      continue;
    }
    const key = flag?.replace(/^--/, "");
    if (key !== "iterations" && key !== "count" && key !== "window") {
      throw new Error(`unknown flag ${flag}: use --iterations N, --count N, --window N or --json`);
    }
    const value = Number(argv[++i]);
    if (!Number.isInteger(value) || value < 1) throw new Error(`${flag} needs a positive integer, got ${argv[i]}`);
    args[key] = value;
  }
  return args;
}

/** Agents of one open channel. */
interface Setup {
  channelId: string;
  peers: Client[];
}

/** Register `n` agents (each its own client), connect them, have the first open a `type` channel with the rest. */
async function setup(target: string, n: number, type: "conversation" | "discussion", tag: string): Promise<Setup> {
  const peers = await Promise.all(Array.from({ length: n }, (_, i) => register(target, { name: `${tag}-${i}` })));
  await Promise.all(peers.map((p) => p.connect()));
  const [first, ...rest] = peers as [Client, ...Client[]];
  const opened = await first.openChannel({ type, targets: rest.map((p) => p.agentId), waitUntilOpened: true });
  return { channelId: opened.channel.channelId, peers };
}

/** Consume `client`'s envelopes, acking each after `handle` ran (as an agent's handler loop would). */
function consume(client: Client, handle: (env: InboundEnvelope) => void): Promise<void> {
  return (async () => {
    for await (const env of client.envelopes({ autoAck: true })) handle(env);
  })();
}

/** A asks, B answers each of A's texts; latency from A's post to A's receipt of the answer. */
async function roundTrips(s: Setup, iterations: number): Promise<{ p50Ms: number; p99Ms: number }> {
  const [a, b] = s.peers as [Client, Client];
  let failure: unknown;
  const fail = (err: unknown): void => {
    failure ??= err;
  };
  void consume(b, (env) => {
    if (env.eventType === EventType.TEXT && env.senderId === a.agentId) b.postText(s.channelId, "pong").catch(fail);
  }).catch(fail);
  let answered: (() => void) | undefined;
  void consume(a, (env) => {
    if (env.eventType === EventType.TEXT && env.senderId === b.agentId) answered?.();
  }).catch(fail);
  const warmup = Math.min(200, iterations);
  const samples: number[] = [];
  for (let i = 0; i < warmup + iterations; i++) {
    const got = new Promise<void>((resolve) => (answered = resolve));
    const t0 = performance.now();
    a.postText(s.channelId, "ping").catch(fail);
    await got;
    if (failure !== undefined) throw failure;
    if (i >= warmup) samples.push(performance.now() - t0);
  }
  samples.sort((x, y) => x - y);
  const p50 = samples[Math.floor(samples.length / 2)] ?? NaN;
  const p99 = samples[Math.max(0, Math.floor(samples.length * 0.99) - 1)] ?? NaN;
  return { p50Ms: p50, p99Ms: p99 };
}

/**
 * The first peer posts `count` envelopes of `eventType` with `window` in flight; every
 * other peer counts those it receives. Deliveries per second until the last one arrived.
 */
async function oneWay(s: Setup, count: number, window: number, eventType: string): Promise<number> {
  const [sender, ...receivers] = s.peers as [Client, ...Client[]];
  const want = count * receivers.length;
  let received = 0;
  let failure: unknown;
  let allReceived: (() => void) | undefined;
  let failed: ((err: unknown) => void) | undefined;
  const done = new Promise<void>((resolve, reject) => {
    allReceived = resolve;
    failed = reject;
  });
  const fail = (err: unknown): void => {
    failure ??= err;
    failed?.(err);
  };
  for (const r of receivers) {
    void consume(r, (env) => {
      if (env.eventType === eventType && ++received === want) allReceived?.();
    }).catch(fail);
  }
  let inFlight = 0;
  let slot: (() => void) | undefined;
  const settled = (): void => {
    inFlight -= 1;
    const wake = slot;
    slot = undefined;
    wake?.();
  };
  const t0 = performance.now();
  for (let i = 0; i < count; i++) {
    if (inFlight >= window) await new Promise<void>((resolve) => (slot = resolve));
    if (failure !== undefined) throw failure;
    inFlight += 1;
    sender.post({ channelId: s.channelId, eventType, eventData: { text: `m${i}` } }).then(settled, (err: unknown) => {
      settled();
      fail(err);
    });
  }
  await done;
  return want / ((performance.now() - t0) / 1000);
}

/** Run `fn` against a fresh hub and an open channel of `n` agents; close everything after. */
async function withChannel<T>(n: number, type: "conversation" | "discussion", tag: string, fn: (s: Setup) => Promise<T>): Promise<T> {
  const hub = await startDirectHub();
  try {
    const s = await setup(hub.target, n, type, tag);
    try {
      return await fn(s);
    } finally {
      await Promise.all(s.peers.map((p) => p.close()));
    }
  } finally {
    await hub.stop();
  }
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const rtt = await withChannel(2, "conversation", "ts-rtt", (s) => roundTrips(s, args.iterations));
  const throughput = await withChannel(2, "conversation", "ts-tput", (s) => oneWay(s, args.count, args.window, EventType.TEXT));
  const fanOut = await withChannel(9, "discussion", "ts-fan", (s) =>
    oneWay(s, Math.max(1, Math.floor(args.count / 4)), args.window, TICK),
  );
  const fmt = (x: number): string => Math.round(x).toLocaleString("en-US");
  console.log(`TypeScript bridge (node ${process.version}) against python -m hubsvc (SQLite WAL)`);
  console.log(`round trip p50 / p99     ${rtt.p50Ms.toFixed(3)} / ${rtt.p99Ms.toFixed(3)} ms (${args.iterations} round trips)`);
  console.log(`one-way throughput       ${fmt(throughput)} msg/s (${args.count} posts, ${args.window} in flight)`);
  console.log(`8-way fan-out            ${fmt(fanOut)} deliveries/s (${Math.floor(args.count / 4)} posts to 8 members)`);
  if (args.json) console.log(JSON.stringify({ rtt, throughput, fanOut }));
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
