import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { BackendError } from "../port.ts";
import { openTestStore, sizedMessage, textMessage } from "../../../tests/helpers/embedded_store.ts";
import { waitFor } from "../../../tests/helpers/wait.ts";

const address = { stream: "s", topic: "t", partition: 0 };

Deno.test("open() of a file store runs the writer in a worker", async () => {
  await using store = await openTestStore();
  assert.equal(store.backend.stats().writerThread, "worker");
});

Deno.test("a crashed writer rejects pending appends with unavailable and health() says why", async () => {
  // The fault is injected at the worker's boundary: the test keeps the worker it starts and
  // posts it a request it does not know, the worker's own crash path.
  let worker: Worker | undefined;
  const startWorker = (url: URL) => worker = new Worker(url.href, { type: "module" });
  await using store = await openTestStore({ startWorker });
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 1 });
  await backend.append({ ...address, messages: [textMessage("before")] });
  const pending = Array.from(
    { length: 50 },
    (_, i) => backend.append({ ...address, messages: [textMessage(`${i}`)] }),
  );
  worker!.postMessage({ type: "crash", id: 0 });
  const results = await Promise.allSettled(pending);
  // Appends do not go through the writer (messages go to the log), so all may have landed
  // before the crash is noticed; wait for it.
  await waitFor(() => !backend.health().ready, 5000, "the writer's crash to be noticed");
  // Some may have committed before the crash; every other one fails as unavailable, none hangs.
  for (const r of results) {
    if (r.status === "rejected") {
      assert.ok(r.reason instanceof BackendError, String(r.reason));
      assert.equal(r.reason.code, "unavailable");
    }
  }
  await assert.rejects(
    backend.append({ ...address, messages: [textMessage("after")] }),
    (e: unknown) => e instanceof BackendError && e.code === "unavailable",
  );
  const health = backend.health();
  assert.equal(health.ready, false);
  assert.match(health.reason ?? "", /writer stopped/);
  // Reads still work from the main thread's connection.
  assert.ok((await backend.poll(address, 0, 100)).length >= 1);
});

Deno.test("open() refuses a store of schema version 1 (one row per message), naming the version", async () => {
  await using store = await openTestStore();
  const path = `${store.dir}/v1.db`;
  const db = new DatabaseSync(path);
  db.exec("CREATE TABLE messages (x INTEGER); PRAGMA user_version = 1");
  db.close();
  const backend = store.reopen({ path });
  await assert.rejects(backend.open(), (e: unknown) => {
    assert.ok(e instanceof BackendError);
    assert.equal(e.code, "unavailable");
    assert.match(e.message, /schema version 1 .*only version 3/);
    return true;
  });
  assert.equal(backend.health().ready, false);
});

Deno.test("open() refuses a store whose meta table names an unknown schema version", async () => {
  await using store = await openTestStore();
  await store.backend.close();
  const db = new DatabaseSync(store.path);
  db.exec("UPDATE meta SET value = 99 WHERE key = 'schema_version'");
  db.close();
  for (const readOnly of [false, true]) {
    await assert.rejects(
      store.reopen({ readOnly }).open(),
      (e: unknown) => e instanceof BackendError && /schema version 99/.test(e.message),
    );
  }
});

Deno.test("poll() sees an append as soon as it resolves (reads on their own connection)", async () => {
  await using store = await openTestStore();
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 2 });
  for (let i = 0; i < 30; i++) {
    const { baseOffset } = await backend.append({
      ...address,
      partition: i % 2,
      messages: [textMessage(`m${i}`), textMessage(`n${i}`)],
    });
    const polled = await backend.poll({ ...address, partition: i % 2 }, baseOffset!, 10);
    assert.deepEqual(polled.map((m) => new TextDecoder().decode(m.payload)), [`m${i}`, `n${i}`]);
  }
});

Deno.test("storeOffset() commits through the writer and getOffset() reads it at once", async () => {
  await using store = await openTestStore();
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 1 });
  await Promise.all([
    backend.append({ ...address, messages: [textMessage("a")] }),
    backend.storeOffset("gw", address, 0),
  ]);
  assert.equal(await backend.getOffset("gw", address), 0);
  await backend.storeOffset("gw", address, 1);
  assert.equal(await backend.getOffset("gw", address), 1);
});

Deno.test("messages go to the log's segment files, not the catalog's WAL", async () => {
  await using store = await openTestStore();
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 1 });
  // ~6 MB in back-to-back transactions, several always queued.
  const inFlight: Promise<unknown>[] = [];
  for (let i = 0; i < 60; i++) {
    inFlight.push(backend.append({
      ...address,
      messages: Array.from({ length: 10 }, () => sizedMessage(10_000)),
    }));
    if (inFlight.length >= 4) await inFlight.shift();
  }
  await Promise.all(inFlight);
  assert.equal(await backend.nextOffset(address), 600);
  const wal = await Deno.stat(`${store.path}-wal`).then((s) => s.size, () => 0);
  assert.ok(wal < 1024 * 1024, `the catalog's WAL grew to ${wal} bytes`);
  let segmentBytes = 0;
  for await (const e of Deno.readDir(`${store.path}-log`)) {
    segmentBytes += (await Deno.stat(`${store.path}-log/${e.name}`)).size;
  }
  assert.ok(segmentBytes >= 6_000_000, `segments hold ${segmentBytes} bytes`);
});

Deno.test("an in-process writer lets timers run between back-to-back commits", async () => {
  await using store = await openTestStore({ path: ":memory:" });
  const { backend } = store;
  assert.equal(backend.stats().writerThread, "in-process");
  await backend.createTopic("s", "t", { partitions: 1 });
  let stop = false;
  let appended = 0;
  const loop = (async () => {
    // Each append is queued by the previous one's resolution, never by I/O.
    while (!stop) {
      await backend.append({ ...address, messages: [textMessage("x")] });
      appended++;
    }
  })();
  // That this timer fires at all is the test: commits that never let the event loop come round
  // would starve it (and the test would hang); 50 ms lets some appends run first.
  await new Promise((r) => setTimeout(r, 50));
  stop = true;
  await loop;
  assert.ok(appended > 0);
});

Deno.test("a locked catalog fails offset stores without touching append health", async () => {
  await using store = await openTestStore({ writerThread: "in-process" });
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 1 });
  const locker = new DatabaseSync(store.path);
  try {
    locker.exec("BEGIN IMMEDIATE"); // another process holds the catalog's write lock
    await assert.rejects(
      backend.storeOffset("gw", address, 0),
      (e: unknown) => e instanceof BackendError && e.code === "unavailable",
    );
    assert.equal(backend.health().reason, undefined);
    assert.equal(backend.health().ready, true);
    assert.deepEqual(await backend.append({ ...address, messages: [textMessage("a")] }), {
      baseOffset: 0,
    });
    locker.exec("ROLLBACK");
    await backend.storeOffset("gw", address, 0);
    assert.equal(await backend.getOffset("gw", address), 0);
  } finally {
    if (locker.isTransaction) locker.exec("ROLLBACK");
    locker.close();
  }
});
