import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { CursorBook } from "../src/cursors";
import { JsonFileCursorStore } from "../src";

test("the cursor follows the prev_seq chain; duplicates are recognised", () => {
  const book = new CursorBook();
  // chain 0 → 2 → 5 (seqs 1, 3, 4 are for others or our own posts)
  assert.equal(book.offer("c", 2, 0, "e2"), "new");
  assert.equal(book.offer("c", 5, 2, "e5"), "new");
  assert.equal(book.offer("c", 5, 2, "e5"), "pending", "redelivered before processing");
  assert.equal(book.process("c", 5), false, "2 is not processed yet");
  assert.equal(book.cursor("c"), 0);
  assert.equal(book.process("c", 2), true);
  assert.equal(book.cursor("c"), 5, "moves over the whole processed chain");
  assert.equal(book.offer("c", 5, 2, "e5"), "processed");
  assert.equal(book.offer("c", 2, 0, "e2"), "processed");
  assert.equal(book.process("c", 5), false, "processing twice is a no-op");
});

test("urgent deliveries overtaking older ones keep the cursor exact", () => {
  const book = new CursorBook();
  book.seed({ c: 10 });
  // 14 (urgent, prev 12) arrives and is processed before 12 (prev 10)
  book.offer("c", 14, 12, "e14");
  book.process("c", 14);
  assert.equal(book.cursor("c"), 10);
  book.offer("c", 12, 10, "e12");
  book.process("c", 12);
  assert.equal(book.cursor("c"), 14);
});

test("seeding never moves a cursor back", () => {
  const book = new CursorBook();
  book.seed({ a: 4 });
  book.seed({ a: 2, b: 3 });
  assert.deepEqual(book.snapshot(), { a: 4, b: 3 });
  assert.equal(book.offer("a", 4, 1, "x"), "processed");
  assert.equal(book.offer("a", 6, 4, "y"), "new");
});

test("JsonFileCursorStore round-trips and coalesces writes", async () => {
  const dir = await mkdtemp(join(tmpdir(), "cursors-"));
  try {
    const path = join(dir, "nested", "cursors.json");
    const store = new JsonFileCursorStore(path);
    assert.deepEqual(await store.load("agent"), {});
    await Promise.all([store.save("agent", { c: 1 }), store.save("agent", { c: 2 }), store.save("other", { d: 9 })]);
    assert.deepEqual(await store.load("agent"), { c: 2 });
    assert.deepEqual(JSON.parse(await readFile(path, "utf8")), { agent: { c: 2 }, other: { d: 9 } });
    assert.deepEqual(await new JsonFileCursorStore(path).load("other"), { d: 9 });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
