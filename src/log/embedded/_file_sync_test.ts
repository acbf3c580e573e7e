import assert from "node:assert/strict";
import { BackendError } from "../port.ts";
import { FileSync, MAX_OVERLAPPING_SYNCS } from "./_file_sync.ts";
import { openTestStore, textMessage } from "../../../tests/helpers/embedded_store.ts";
import { waitFor } from "../../../tests/helpers/wait.ts";

const address = { stream: "s", topic: "t", partition: 0 };

/**
 * Replaces `Deno.FsFile.prototype.syncData` for one test: each call waits until the test
 * releases it (or fails it). Restored by dispose.
 */
function holdSyncs() {
  const original = Deno.FsFile.prototype.syncData;
  const calls: PromiseWithResolvers<void>[] = [];
  const all: PromiseWithResolvers<void>[] = [];
  let started = 0;
  Deno.FsFile.prototype.syncData = function (this: Deno.FsFile) {
    started++;
    const held = Promise.withResolvers<void>();
    calls.push(held);
    all.push(held);
    return held.promise.then(() => original.call(this));
  };
  return {
    get started() {
      return started;
    },
    /** The `i`-th fsync started (0-based), to release or fail out of order. */
    nth: (i: number) => all[i],
    /** Lets the oldest held fsync run. */
    release: () => calls.shift()!.resolve(),
    /** Fails the oldest held fsync as a disk error would. */
    fail: () => calls.shift()!.reject(new Error("EIO: input/output error")),
    /** Waits until `n` fsyncs have started, and no more. */
    async waitStarted(n: number) {
      await waitFor(() => started >= n, 5000, `fsync number ${n} to start`);
      assert.equal(started, n);
    },
    [Symbol.dispose]() {
      Deno.FsFile.prototype.syncData = original;
      for (const c of all) c.resolve();
    },
  };
}

/**
 * One turn of the event loop: every promise continuation queued before it has run. Used where a
 * test asserts that something did not happen and the code under test would have done it in such
 * continuations: an fsync started on an open handle calls `syncData()` one `await` later, and an
 * append that did not wait for its fsync would resolve from its write's promise.
 */
const tick = () => new Promise((r) => setTimeout(r, 0));

async function withWal(body: (path: string) => Promise<void>) {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/x.db-wal`, "frames");
    await body(`${dir}/x.db-wal`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/**
 * A FileSync whose two handles are already open: each slot opens its handle on first use, and
 * two first opens may finish in either order, so the held fsyncs' order would not be the order
 * they started in.
 */
async function warmedSync(path: string): Promise<FileSync> {
  const sync = new FileSync(path);
  await Promise.all([sync.sync(), sync.sync()]);
  return sync;
}

Deno.test("FileSync overlaps two fsyncs; a caller while both run shares the next, in order", async () => {
  await withWal(async (path) => {
    assert.equal(MAX_OVERLAPPING_SYNCS, 2);
    const sync = await warmedSync(path);
    using held = holdSyncs();
    const settled: string[] = [];
    const first = sync.sync().then(() => settled.push("first"));
    await held.waitStarted(1);
    // Its write may have come after the first fsync started: its own starts at once.
    const second = sync.sync().then(() => settled.push("second"));
    await held.waitStarted(2);
    const third = sync.sync().then(() => settled.push("third"));
    const fourth = sync.sync().then(() => settled.push("fourth"));
    await tick();
    assert.equal(held.started, 2, "no third fsync while two run");
    held.release();
    await first;
    // A slot freed: the callers that waited got their fsync before anyone was settled.
    await held.waitStarted(3);
    assert.deepEqual(settled, ["first"]);
    held.release();
    await second;
    held.release();
    await Promise.all([third, fourth]);
    assert.deepEqual(settled, ["first", "second", "third", "fourth"]);
    assert.equal(sync.syncs, 2 + 3);
    await sync.close();
  });
});

Deno.test("FileSync: a later fsync that finishes first settles the earlier callers too, oldest first", async () => {
  await withWal(async (path) => {
    const sync = await warmedSync(path);
    using held = holdSyncs();
    const settled: string[] = [];
    const first = sync.sync().then(() => settled.push("first"));
    const second = sync.sync().then(() => settled.push("second"));
    await held.waitStarted(2);
    // The second fsync started after the first caller's write: when it ends, both are durable.
    held.nth(1).resolve();
    await Promise.all([first, second]);
    assert.deepEqual(settled, ["first", "second"]);
    held.nth(0).resolve();
    await sync.close();
    assert.equal(sync.syncs, 2 + 2);
  });
});

Deno.test("FileSync: a failed fsync rejects only its callers, after the earlier ones settle", async () => {
  await withWal(async (path) => {
    const sync = await warmedSync(path);
    using held = holdSyncs();
    const settled: string[] = [];
    const first = sync.sync().then(() => settled.push("first"));
    const second = sync.sync().then(
      () => settled.push("second"),
      (e: Error) => settled.push(`second: ${e.message}`),
    );
    await held.waitStarted(2);
    held.nth(1).reject(new Error("EIO"));
    // The failed slot is free again, its handle reopened: a third caller's fsync starts there,
    // which shows the failure has been handled (and nothing settled by it).
    const third = sync.sync();
    await held.waitStarted(3);
    assert.deepEqual(settled, [], "the failure waits for the older caller");
    held.nth(0).resolve();
    await Promise.all([first, second]);
    assert.deepEqual(settled, ["first", "second: EIO"]);
    held.nth(2).resolve();
    await third;
    await sync.close();
  });
});

Deno.test("FileSync rejects when the fsync fails, and the next call tries again", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/x.db-wal`, "frames");
    using held = holdSyncs();
    const sync = new FileSync(`${dir}/x.db-wal`);
    const failing = sync.sync();
    await held.waitStarted(1);
    held.fail();
    await assert.rejects(failing, /EIO/);
    const again = sync.sync();
    await held.waitStarted(2);
    held.release();
    await again;
    await sync.close();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("FileSync of no file (a :memory: store) resolves without touching a file", async () => {
  using held = holdSyncs();
  const sync = new FileSync("");
  await sync.sync();
  assert.equal(held.started, 0);
});

Deno.test("append() resolves only after the fsync after its write; readers see it at the write", async () => {
  await using store = await openTestStore({ writerThread: "in-process" });
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 1 });
  using held = holdSyncs();
  const startedBefore = held.started;
  let resolved = false;
  const committedAt: number[] = [];
  const append = backend.append({
    ...address,
    messages: [textMessage("x")],
    onCommitted: (base) => committedAt.push(base),
  }).then((r) => {
    resolved = true;
    return r;
  });
  await held.waitStarted(startedBefore + 1);
  // Written to the log (in the page cache) but not yet on disk: readable, and
  // its hook has run, but the append (the PUBACK) waits for the fsync.
  assert.equal(backend.stats().commits, 0);
  await tick();
  assert.equal(resolved, false);
  assert.deepEqual(committedAt, [0]);
  assert.equal(await backend.nextOffset(address), 1);
  assert.equal((await backend.poll(address, 0, 10)).length, 1);
  held.release();
  assert.deepEqual(await append, { baseOffset: 0 });
  assert.deepEqual(committedAt, [0], "the hook runs once");
  assert.equal(backend.stats().commits, 1);
});

Deno.test("append() rejects when the log's fsync fails; later appends go on", async () => {
  await using store = await openTestStore({ writerThread: "in-process" });
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 1 });
  using held = holdSyncs();
  const lost = backend.append({ ...address, messages: [textMessage("x")] });
  await held.waitStarted(1);
  held.fail();
  await assert.rejects(lost, (e: unknown) => e instanceof BackendError);
  const next = backend.append({ ...address, messages: [textMessage("y")] });
  await held.waitStarted(2);
  held.release();
  assert.deepEqual(await next, { baseOffset: 1 });
});

Deno.test("health stays not ready while fsyncs fail, though later transactions are still written", async () => {
  await using store = await openTestStore({ writerThread: "in-process" });
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 1 });
  using held = holdSyncs();
  const first = backend.append({ ...address, messages: [textMessage("x")] });
  await held.waitStarted(1);
  held.fail();
  await assert.rejects(first, (e: unknown) => e instanceof BackendError);
  assert.equal(backend.health().ready, false);
  // The next transaction commits (readable) but its fsync is still held: not healthy yet.
  const second = backend.append({ ...address, messages: [textMessage("y")] });
  await held.waitStarted(2);
  assert.equal(await backend.nextOffset(address), 2);
  assert.equal(backend.health().ready, false, "a write alone does not make the disk healthy");
  held.release();
  assert.deepEqual(await second, { baseOffset: 1 });
  assert.equal(backend.health().ready, true);
});
