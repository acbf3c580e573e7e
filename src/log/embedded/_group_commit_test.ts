import assert from "node:assert/strict";
import { BackendError } from "../port.ts";
import { openTestStore, sizedMessage, textMessage } from "../../../tests/helpers/embedded_store.ts";

const address = { stream: "s", topic: "t", partition: 0 };

Deno.test("append() calls made together share one transaction", async () => {
  await using store = await openTestStore();
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 2 });
  const before = backend.stats().commits;
  const receipts = await Promise.all(
    Array.from(
      { length: 200 },
      (_, i) => backend.append({ ...address, partition: i % 2, messages: [textMessage(`${i}`)] }),
    ),
  );
  assert.equal(backend.stats().commits - before, 1);
  assert.equal(backend.stats().appended, 200);
  assert.deepEqual(receipts.filter((_, i) => i % 2 === 0).map((r) => r.baseOffset), [
    ...Array(100).keys(),
  ]);
});

Deno.test("append() splits a burst into transactions of at most maxAppendBatch messages", async () => {
  await using store = await openTestStore({ maxAppendBatch: 100 });
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 1 });
  const before = backend.stats().commits;
  await Promise.all(
    Array.from({ length: 250 }, () => backend.append({ ...address, messages: [sizedMessage(10)] })),
  );
  assert.equal(backend.stats().commits - before, 3);
  assert.equal(await backend.nextOffset(address), 250);
});

Deno.test("append() of one batch larger than maxAppendBatch commits it whole, alone", async () => {
  await using store = await openTestStore({ maxAppendBatch: 10 });
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 1 });
  const before = backend.stats().commits;
  const [small, big] = await Promise.all([
    backend.append({ ...address, messages: [textMessage("a")] }),
    backend.append({ ...address, messages: Array.from({ length: 25 }, () => sizedMessage(5)) }),
  ]);
  assert.deepEqual([small.baseOffset, big.baseOffset], [0, 1]);
  assert.equal(backend.stats().commits - before, 2);
});

Deno.test("append() resolves only after the group commit that holds it", async () => {
  await using store = await openTestStore();
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 1 });
  const before = backend.stats().commits;
  let committedWhenResolved = -1;
  await backend.append({ ...address, messages: [textMessage("x")] }).then(() => {
    committedWhenResolved = backend.stats().commits - before;
  });
  assert.equal(committedWhenResolved, 1);
});

Deno.test("append() keeps offsets contiguous per partition when many appends share transactions", async () => {
  await using store = await openTestStore();
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 3 });
  await Promise.all(Array.from({ length: 301 }, (_, i) =>
    backend.append({
      ...address,
      partition: i % 3,
      messages: [textMessage(`${i}`, { n: `${i}` }), textMessage(`${i}b`)],
    })));
  for (let p = 0; p < 3; p++) {
    const polled = await backend.poll({ ...address, partition: p }, 0, 1000);
    assert.deepEqual(polled.map((m) => m.offset), [...Array(polled.length).keys()]);
    for (let k = 0; k < polled.length; k += 2) {
      const i = Number(polled[k].headers.get("n"));
      assert.equal(i % 3, p);
      assert.equal(new TextDecoder().decode(polled[k + 1].payload), `${i}b`);
    }
  }
});

Deno.test("append() rejects an empty batch or payload as invalid without queueing it", async () => {
  await using store = await openTestStore();
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 1 });
  for (const messages of [[], [{ payload: new Uint8Array(0), headers: new Map() }]]) {
    await assert.rejects(
      backend.append({ ...address, messages }),
      (e: unknown) => e instanceof BackendError && e.code === "invalid",
    );
  }
  assert.equal(await backend.nextOffset(address), 0);
});

Deno.test("close() commits appends still queued; they resolve", async () => {
  await using store = await openTestStore();
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 1 });
  const pending = backend.append({ ...address, messages: [textMessage("late")] });
  await backend.close();
  assert.deepEqual(await pending, { baseOffset: 0 });
  const reopened = store.reopen();
  await reopened.open();
  assert.equal(await reopened.nextOffset(address), 1);
});
