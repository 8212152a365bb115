import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname } from "node:path";

/** channel_id → cursor (the highest seq such that everything at or below it is done). */
export type Cursors = Record<string, number>;

/**
 * Where a client keeps its per-channel resume cursors between processes. With a
 * store, a restarted bridge resumes exactly after the last envelope it processed
 * instead of after the last one the hub saw acked.
 */
export interface CursorStore {
  /** The cursors saved for `agentId` (`{}` when none). */
  load(agentId: string): Promise<Cursors>;
  /** Replace the cursors saved for `agentId`. */
  save(agentId: string, cursors: Cursors): Promise<void>;
}

/** A {@link CursorStore} in memory (shared by clients of one process, lost on exit). */
export class MemoryCursorStore implements CursorStore {
  private readonly data = new Map<string, Cursors>();

  /** {@inheritDoc CursorStore.load} */
  async load(agentId: string): Promise<Cursors> {
    return { ...(this.data.get(agentId) ?? {}) };
  }

  /** {@inheritDoc CursorStore.save} */
  async save(agentId: string, cursors: Cursors): Promise<void> {
    this.data.set(agentId, { ...cursors });
  }
}

/**
 * A {@link CursorStore} in one JSON file: `{"<agent id>": {"<channel id>": seq}}`.
 * Writes go to a temporary file that is renamed over the old one, so a crash
 * never leaves a torn file; saves are serialised and coalesced (only the latest
 * cursors of each agent are written).
 */
export class JsonFileCursorStore implements CursorStore {
  private chain: Promise<void> = Promise.resolve();
  private readonly latest = new Map<string, Cursors>();
  private scheduled = false;

  /** Use the file at `path` (created on the first save, with its directory). */
  constructor(readonly path: string) {}

  /** {@inheritDoc CursorStore.load} */
  async load(agentId: string): Promise<Cursors> {
    await this.chain;
    const all = await this.readAll();
    return { ...(all[agentId] ?? {}) };
  }

  /** {@inheritDoc CursorStore.save} */
  save(agentId: string, cursors: Cursors): Promise<void> {
    this.latest.set(agentId, { ...cursors });
    if (!this.scheduled) {
      this.scheduled = true;
      this.chain = this.chain.then(() => this.flush());
    }
    return this.chain;
  }

  private async flush(): Promise<void> {
    this.scheduled = false;
    if (this.latest.size === 0) return;
    const updates = new Map(this.latest);
    this.latest.clear();
    const all = await this.readAll();
    for (const [agentId, cursors] of updates) all[agentId] = cursors;
    await mkdir(dirname(this.path), { recursive: true });
    const tmp = `${this.path}.${process.pid}.tmp`;
    await writeFile(tmp, `${JSON.stringify(all, null, 2)}\n`, "utf8");
    await rename(tmp, this.path);
  }

  private async readAll(): Promise<Record<string, Cursors>> {
    let text: string;
    try {
      text = await readFile(this.path, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return {};
      throw err;
    }
    const parsed: unknown = JSON.parse(text);
    const out: Record<string, Cursors> = {};
    if (typeof parsed !== "object" || parsed === null) return out;
    for (const [agentId, value] of Object.entries(parsed)) {
      if (typeof value !== "object" || value === null) continue;
      const cursors: Cursors = {};
      for (const [channelId, seq] of Object.entries(value)) {
        if (typeof seq === "number" && Number.isSafeInteger(seq) && seq >= 0) cursors[channelId] = seq;
      }
      out[agentId] = cursors;
    }
    return out;
  }
}

/** Outcome of offering a delivered envelope to the {@link CursorBook}. */
export type Offer = "new" | "pending" | "processed";

interface Link {
  /** `Delivery.prev_seq`: the previous seq of this participant's chain. */
  prev: number;
  /** The envelope id (duplicates are dropped by it). */
  envelopeId: string;
  /** True once the application processed (acked) it. */
  processed: boolean;
}

interface ChannelCursor {
  /** Every envelope of this participant's chain at or below it was processed. */
  cursor: number;
  /** Delivered links above the cursor: seq → link. */
  links: Map<number, Link>;
  /** prev_seq → seq, to walk the chain from the cursor. */
  next: Map<number, number>;
}

/**
 * The client's own per-channel cursors and duplicate filter.
 *
 * Each `Delivery` names `prev_seq`, the previous seq of this participant's chain
 * in the channel (envelopes addressed to others and its own posts are not in the
 * chain). The cursor moves from `prev_seq` to `seq` once that delivery and every
 * one before it in the chain were processed, so it is exact although the client
 * never sees some seqs and urgent deliveries may overtake older ones. Delivered
 * links above the cursor are remembered with their envelope ids, which is what
 * drops duplicates (a redelivery after reconnect).
 *
 * @internal
 */
export class CursorBook {
  private readonly channels = new Map<string, ChannelCursor>();
  private readonly ids = new Set<string>();

  /**
   * Seed cursors from a {@link CursorStore}, or adopt the resume cursors of a
   * Welcome (the hub replays above them). Never moves a cursor back.
   */
  seed(cursors: Cursors): void {
    for (const [channelId, seq] of Object.entries(cursors)) {
      const ch = this.channel(channelId);
      if (seq > ch.cursor) {
        ch.cursor = seq;
        this.advance(ch);
      }
    }
  }

  /** Every channel's cursor (what Hello sends and a CursorStore saves). */
  snapshot(): Cursors {
    const out: Cursors = {};
    for (const [channelId, ch] of this.channels) out[channelId] = ch.cursor;
    return out;
  }

  /** The cursor of one channel (0 when unknown). */
  cursor(channelId: string): number {
    return this.channels.get(channelId)?.cursor ?? 0;
  }

  /**
   * Record a delivery. `"new"` = first time seen (now pending); `"pending"` =
   * delivered before and not processed yet; `"processed"` = processed before.
   */
  offer(channelId: string, seq: number, prevSeq: number, envelopeId: string): Offer {
    const ch = this.channel(channelId);
    const known = ch.links.get(seq);
    if (known !== undefined) return known.processed ? "processed" : "pending";
    if (seq <= ch.cursor) return "processed";
    if (envelopeId !== "" && this.ids.has(envelopeId)) return "pending";
    ch.links.set(seq, { prev: prevSeq, envelopeId, processed: false });
    ch.next.set(prevSeq, seq);
    if (envelopeId !== "") this.ids.add(envelopeId);
    return "new";
  }

  /** Mark a delivered envelope processed; returns true when the channel's cursor moved. */
  process(channelId: string, seq: number): boolean {
    const ch = this.channels.get(channelId);
    const link = ch?.links.get(seq);
    if (ch === undefined || link === undefined || link.processed) return false;
    link.processed = true;
    const before = ch.cursor;
    this.advance(ch);
    return ch.cursor !== before;
  }

  private channel(channelId: string): ChannelCursor {
    let ch = this.channels.get(channelId);
    if (ch === undefined) {
      ch = { cursor: 0, links: new Map(), next: new Map() };
      this.channels.set(channelId, ch);
    }
    return ch;
  }

  private advance(ch: ChannelCursor): void {
    for (;;) {
      const seq = ch.next.get(ch.cursor);
      const link = seq === undefined ? undefined : ch.links.get(seq);
      if (seq === undefined || link === undefined || !link.processed) break;
      ch.cursor = seq;
    }
    for (const [seq, link] of ch.links) {
      if (seq > ch.cursor || !link.processed) continue;
      ch.links.delete(seq);
      if (ch.next.get(link.prev) === seq) ch.next.delete(link.prev);
      this.ids.delete(link.envelopeId);
    }
  }
}
