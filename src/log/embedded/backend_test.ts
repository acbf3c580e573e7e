import assert from "node:assert/strict";
import { BackendError } from "../port.ts";
import { EmbeddedBackend } from "./backend.ts";
import { openTestStore, sizedMessage, textMessage } from "../../../tests/helpers/embedded_store.ts";

const address = { stream: "s", topic: "t", partition: 0 };
const SMALL_STORE = 96 * 1024;

/** Appends 1 KiB messages until the store reports full; returns how many fit. */
async function fillUp(backend: EmbeddedBackend): Promise<number> {
  for (let i = 0; i < 1000; i++) {
    try {
      await backend.append({ ...address, messages: [sizedMessage(1024)] });
    } catch (e) {
      assert.ok(e instanceof BackendError);
      assert.equal(e.code, "full");
      assert.equal(e.retryable, true);
      return i;
    }
  }
  throw new Error("the store never filled up");
}

Deno.test("append() to a full store rejects with full and health() says why", async () => {
  await using store = await openTestStore({ maxStoreBytes: SMALL_STORE });
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 1 });
  const fitted = await fillUp(backend);
  assert.ok(fitted > 10, `only ${fitted} messages fitted`);
  const health = backend.health();
  assert.equal(health.ready, false);
  assert.match(health.reason ?? "", /full: max_store_bytes reached/);
  // Nothing of the failed transaction is visible; reads still work.
  assert.equal(await backend.nextOffset(address), fitted);
  assert.equal((await backend.poll(address, 0, 10_000)).length, fitted);
});

Deno.test("append() to a full store succeeds again once retention frees room", async () => {
  await using store = await openTestStore({ maxStoreBytes: SMALL_STORE });
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 1, maxTopicBytes: 8 * 1024 });
  const fitted = await fillUp(backend);
  const { deleted } = await backend.runRetention();
  assert.ok(deleted > 0);
  const { baseOffset } = await backend.append({ ...address, messages: [sizedMessage(1024)] });
  assert.equal(baseOffset, fitted, "offsets continue where they were");
  assert.equal(backend.health().reason, undefined);
  assert.equal(backend.health().ready, true);
});

Deno.test("append() to a full store succeeds after reopening with a bigger bound", async () => {
  await using store = await openTestStore({ maxStoreBytes: SMALL_STORE });
  await store.backend.createTopic("s", "t", { partitions: 1 });
  const fitted = await fillUp(store.backend);
  await store.backend.close();
  const bigger = store.reopen({ maxStoreBytes: 4 * SMALL_STORE });
  await bigger.open();
  assert.deepEqual(await bigger.append({ ...address, messages: [sizedMessage(1024)] }), {
    baseOffset: fitted,
  });
});

Deno.test("open() of an existing file keeps topics, messages, next and consumer offsets", async () => {
  await using store = await openTestStore();
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 3 });
  await backend.append({ ...address, partition: 2, messages: [textMessage("a", { h: "1" })] });
  await backend.append({ ...address, partition: 2, messages: [textMessage("b")] });
  await backend.storeOffset("gw", { ...address, partition: 2 }, 1);
  await backend.close();

  const reopened = store.reopen();
  await reopened.open();
  const p2 = { ...address, partition: 2 };
  assert.deepEqual(await reopened.getTopic("s", "t"), { stream: "s", topic: "t", partitions: 3 });
  const polled = await reopened.poll(p2, 0, 10);
  assert.deepEqual(polled.map((m) => new TextDecoder().decode(m.payload)), ["a", "b"]);
  assert.deepEqual([...polled[0].headers], [["h", "1"]]);
  assert.equal(await reopened.nextOffset(p2), 2);
  assert.equal(await reopened.getOffset("gw", p2), 1);
  assert.deepEqual(await reopened.append({ ...p2, messages: [textMessage("c")] }), {
    baseOffset: 2,
  });
});

Deno.test("a read-only backend reads what a running writer commits", async () => {
  await using store = await openTestStore();
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 1 });
  await backend.append({ ...address, messages: [textMessage("one")] });
  const reader = store.reopen({ readOnly: true });
  await reader.open();
  await backend.createTopic("s", "later", { partitions: 1 });
  await backend.append({ ...address, messages: [textMessage("two")] });
  assert.equal((await reader.poll(address, 0, 10)).length, 2);
  assert.equal(await reader.nextOffset(address), 2);
  assert.notEqual(await reader.getTopic("s", "later"), null);
  await assert.rejects(
    reader.append({ ...address, messages: [textMessage("x")] }),
    (e: unknown) => e instanceof BackendError && e.code === "invalid",
  );
});

Deno.test("open() rejects with unavailable naming the path when the file cannot be opened", async () => {
  await using store = await openTestStore();
  const path = `${store.dir}/missing/store.db`;
  const backend = new EmbeddedBackend({
    path,
    users: [],
    maxStoreBytes: 1 << 20,
    retentionMaxAgeSeconds: 0,
    retentionMaxTopicBytes: 0,
    retentionIntervalMs: 1000,
    maxAppendBatch: 100,
    readOnly: true, // read-only does not create: the file must exist
    writerThread: "in-process", // unused when read-only
  });
  await assert.rejects(backend.open(), (e: unknown) => {
    assert.ok(e instanceof BackendError);
    assert.equal(e.code, "unavailable");
    assert.ok(e.message.startsWith(`Cannot open embedded store "${path}": `), e.message);
    return true;
  });
  assert.equal(backend.health().ready, false);
});

Deno.test("open() rejects a file that is not a SQLite database", async () => {
  await using store = await openTestStore();
  const path = `${store.dir}/garbage.db`;
  await Deno.writeTextFile(path, "this is not a database ".repeat(100));
  const backend = store.reopen({ path });
  await assert.rejects(
    backend.open(),
    (e: unknown) => e instanceof BackendError && e.code === "unavailable",
  );
});

Deno.test("health() is not ready before open() and append() rejects unavailable", async () => {
  await using store = await openTestStore();
  const fresh = store.reopen();
  assert.equal(fresh.health().ready, false);
  assert.match(fresh.health().reason ?? "", /not open/);
  await assert.rejects(
    fresh.append({ ...address, messages: [textMessage("x")] }),
    (e: unknown) => e instanceof BackendError && e.code === "unavailable",
  );
});

Deno.test("createTopic() refuses names outside 1..255 bytes and zero partitions", async () => {
  await using store = await openTestStore();
  const { backend } = store;
  for (
    const [stream, topic, partitions] of [["", "t", 1], ["s", "x".repeat(256), 1], ["s", "t", 0]]
  ) {
    await assert.rejects(
      backend.createTopic(stream as string, topic as string, { partitions: partitions as number }),
      (e: unknown) => e instanceof BackendError && e.code === "invalid",
    );
  }
});

Deno.test("open() creates missing parent directories and works on :memory:", async () => {
  await using store = await openTestStore();
  const nested = store.reopen({ path: `${store.dir}/a/b/c/store.db` });
  await nested.open();
  assert.equal(nested.health().ready, true);
  const memory = store.reopen({ path: ":memory:" });
  await memory.open();
  await memory.createTopic("s", "t", { partitions: 1 });
  assert.deepEqual(await memory.append({ ...address, messages: [textMessage("x")] }), {
    baseOffset: 0,
  });
});
