/**
 * An unbounded single-consumer async queue: `push` never blocks, `shift` waits
 * for the next item. `end()` finishes it after the buffered items are taken;
 * `fail(err)` makes waiting and later `shift` calls reject once the buffer is empty.
 *
 * @internal
 */
export class AsyncQueue<T> {
  private readonly items: T[] = [];
  private waiters: Array<{ resolve: (r: IteratorResult<T, undefined>) => void; reject: (e: unknown) => void }> = [];
  private ended = false;
  private error: unknown = undefined;
  private failed = false;

  /** Buffered, not yet taken items. */
  get size(): number {
    return this.items.length;
  }

  /** True once end() or fail() was called. */
  get closed(): boolean {
    return this.ended || this.failed;
  }

  /** Add an item (ignored once closed). */
  push(item: T): void {
    if (this.closed) return;
    const waiter = this.waiters.shift();
    if (waiter !== undefined) waiter.resolve({ value: item, done: false });
    else this.items.push(item);
  }

  /** Finish the queue: waiting and later shifts see `done` once the buffer is drained. */
  end(): void {
    if (this.closed) return;
    this.ended = true;
    this.flushWaiters();
  }

  /** Fail the queue: waiting and later shifts reject with `err` once the buffer is drained. */
  fail(err: unknown): void {
    if (this.closed) return;
    this.failed = true;
    this.error = err;
    this.flushWaiters();
  }

  /** The next item, waiting for one if needed. */
  shift(): Promise<IteratorResult<T, undefined>> {
    if (this.items.length > 0) {
      return Promise.resolve({ value: this.items.shift() as T, done: false });
    }
    if (this.failed) return Promise.reject(this.error);
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  private flushWaiters(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) {
      if (this.failed) w.reject(this.error);
      else w.resolve({ value: undefined, done: true });
    }
  }
}
