import assert from "node:assert/strict";
import { BackendError } from "../port.ts";
import { FileSync } from "./_file_sync.ts";
import { openTestStore, textMessage } from "./_testing.ts";

const address = { stream: "s", topic: "t", partition: 0 };

/**
 * Replaces `Deno.FsFile.prototype.syncData` for one test: each call waits until the test
 * releases it (or fails it). Restored by dispose.
 */
function holdSyncs() {
  const original = Deno.FsFile.prototype.syncData;
  const calls: PromiseWithResolvers<void>[] = [];
  let started = 0;
  Deno.FsFile.prototype.syncData = function (this: Deno.FsFile) {
    started++;
    const held = Promise.withResolvers<void>();
    calls.push(held);
    return held.promise.then(() => original.call(this));
  };
  return {
    get started() {
      return started;
    },
    /** Lets the oldest held fsync run. */
    release: () => calls.shift()!.resolve(),
    /** Fails the oldest held fsync as a disk error would. */
    fail: () => calls.shift()!.reject(new Error("EIO: input/output error")),
    /** Waits until `n` fsyncs have started. */
    async waitStarted(n: number) {
      for (let i = 0; i < 200 && started < n; i++) await new Promise((r) => setTimeout(r, 5));
      assert.equal(started, n);
    },
    [Symbol.dispose]() {
      Deno.FsFile.prototype.syncData = original;
      for (const c of calls) c.resolve();
    },
  };
}

const tick = () => new Promise((r) => setTimeout(r, 20));

Deno.test("FileSync runs one fsync at a time; callers during one share the next, in order", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/x.db-wal`, "frames");
    using held = holdSyncs();
    const sync = new FileSync(`${dir}/x.db-wal`);
    const settled: string[] = [];
    const first = sync.sync().then(() => settled.push("first"));
    await held.waitStarted(1);
    const second = sync.sync().then(() => settled.push("second"));
    const third = sync.sync().then(() => settled.push("third"));
    await tick();
    assert.equal(held.started, 1, "no second fsync while one runs");
    held.release();
    await first;
    // The next fsync started for the callers that asked during the first one.
    await held.waitStarted(2);
    assert.deepEqual(settled, ["first"]);
    held.release();
    await Promise.all([second, third]);
    assert.deepEqual(settled, ["first", "second", "third"]);
    assert.equal(sync.syncs, 2);
    await sync.close();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
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
