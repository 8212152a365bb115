/** Test support: waiting for conditions and collecting envelopes. */
import type { Client, InboundEnvelope } from "../src";

/** Poll `condition` every 10 ms until it returns a truthy value (or throw after `timeoutMs`). */
export async function waitFor<T>(condition: () => T | undefined | false | null, what: string, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = condition();
    if (value !== undefined && value !== false && value !== null) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * Drain a client's envelopes in the background into `received`; `autoAck`
 * acks each one after recording it. The loop ends when the client closes.
 */
export class Collector {
  /** Every envelope handed out, in order. */
  readonly received: InboundEnvelope[] = [];
  /** The loop (resolves when the client closes; rejects when the stream failed). */
  readonly done: Promise<void>;

  constructor(client: Client, autoAck: boolean) {
    this.done = (async () => {
      for await (const env of client.envelopes()) {
        this.received.push(env);
        if (autoAck) env.ack();
      }
    })();
    this.done.catch(() => undefined);
  }

  /** Received texts of one channel, in order. */
  texts(channelId: string): string[] {
    return this.received.filter((e) => e.channelId === channelId && e.text !== undefined).map((e) => e.text as string);
  }

  /** Wait until an envelope matching `predicate` was received. */
  waitFor(predicate: (env: InboundEnvelope) => boolean, what: string, timeoutMs = 10_000): Promise<InboundEnvelope> {
    return waitFor(() => this.received.find(predicate), what, timeoutMs);
  }
}
