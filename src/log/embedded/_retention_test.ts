import assert from "node:assert/strict";
import { CHUNK_RECORDS } from "./_retention.ts";
import { WallClock } from "../../base/wall_clock.ts";
import { openTestStore, sizedMessage, textMessage } from "../../../tests/helpers/embedded_store.ts";

const HOUR_MICROS = 3_600_000_000;
const address = { stream: "s", topic: "t", partition: 0 };

/** A settable clock in microseconds. */
function manualClock(start = 1_700_000_000_000_000) {
  const clock = { now: start, read: () => clock.now };
  return clock;
}

Deno.test("runRetention() deletes messages older than the age limit and keeps newer ones", async () => {
  const clock = manualClock();
  await using store = await openTestStore({ retentionMaxAgeSeconds: 3600, clock: clock.read });
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 2 });
  await backend.append({ ...address, messages: [textMessage("old1"), textMessage("old2")] });
  await backend.append({ ...address, partition: 1, messages: [textMessage("old3")] });
  clock.now += 2 * HOUR_MICROS;
  await backend.append({ ...address, messages: [textMessage("new")] });
  assert.deepEqual(await backend.runRetention(), { deleted: 3 });
  assert.deepEqual((await backend.poll(address, 0, 10)).map((m) => m.offset), [2]);
  assert.deepEqual(await backend.poll({ ...address, partition: 1 }, 0, 10), []);
});

Deno.test("runRetention() drops for good: a reopened store does not bring the messages back", async () => {
  const clock = manualClock();
  await using store = await openTestStore({ retentionMaxAgeSeconds: 60, clock: clock.read });
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 1 });
  await backend.append({ ...address, messages: [textMessage("old")] });
  clock.now += HOUR_MICROS;
  await backend.append({ ...address, messages: [textMessage("new")] });
  assert.deepEqual(await backend.runRetention(), { deleted: 1 });
  await backend.close();
  const reopened = store.reopen();
  await reopened.open();
  assert.deepEqual((await reopened.poll(address, 0, 10)).map((m) => m.offset), [1]);
});

Deno.test("runRetention() keeps next offsets when it empties a partition, also after reopen", async () => {
  const clock = manualClock();
  await using store = await openTestStore({ retentionMaxAgeSeconds: 60, clock: clock.read });
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 1 });
  await backend.append({ ...address, messages: [textMessage("a"), textMessage("b")] });
  assert.deepEqual(await backend.runRetention(clock.now + HOUR_MICROS), { deleted: 2 });
  assert.equal(await backend.nextOffset(address), 2);
  await backend.close();
  const reopened = store.reopen();
  await reopened.open();
  assert.equal(await reopened.nextOffset(address), 2);
  const { baseOffset } = await reopened.append({ ...address, messages: [textMessage("c")] });
  assert.equal(baseOffset, 2);
});

Deno.test("runRetention() deletes whole segments; after reopen offsets go on and nothing comes back", async () => {
  const clock = manualClock();
  // 1 MiB store: 128 KiB segments; ~60 KB messages fill one in about two appends.
  await using store = await openTestStore({
    maxStoreBytes: 1024 * 1024,
    retentionMaxAgeSeconds: 60,
    clock: clock.read,
  });
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 2 });
  for (let i = 0; i < 12; i++) {
    await backend.append({ ...address, partition: i % 2, messages: [sizedMessage(60_000)] });
  }
  const segments = () => [...Deno.readDirSync(`${store.path}-log`)].length;
  const before = segments();
  assert.ok(before >= 5, `${before} segments`);
  clock.now += HOUR_MICROS;
  // Too big for what is left of the active segment: it opens a new one, so every segment that
  // held partition 1's records (its newest included) can go, and only the floors remember 6.
  await backend.append({ ...address, messages: [sizedMessage(120_000)] });
  assert.deepEqual(await backend.runRetention(), { deleted: 12 });
  assert.ok(segments() <= 2, `${segments()} segments left of ${before}`);
  await backend.close();
  const reopened = store.reopen();
  await reopened.open();
  assert.deepEqual((await reopened.poll(address, 0, 100)).map((m) => m.offset), [6]);
  assert.deepEqual(await reopened.poll({ ...address, partition: 1 }, 0, 100), []);
  assert.equal(await reopened.nextOffset({ ...address, partition: 1 }), 6);
  assert.deepEqual(
    await reopened.append({ ...address, partition: 1, messages: [textMessage("x")] }),
    {
      baseOffset: 6,
    },
  );
});

Deno.test("runRetention() trims a topic over its byte limit, oldest first across partitions", async () => {
  const clock = manualClock();
  // 100-byte payloads, no headers: 100 bytes each; keep at most 250 bytes → 2 messages.
  await using store = await openTestStore({ retentionMaxTopicBytes: 250, clock: clock.read });
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 2 });
  for (const partition of [0, 1, 0, 1, 0]) {
    clock.now += 1000;
    await backend.append({ ...address, partition, messages: [sizedMessage(100)] });
  }
  assert.deepEqual(await backend.runRetention(), { deleted: 3 });
  // Survivors: the two newest, partition 1 offset 1 and partition 0 offset 2.
  assert.deepEqual((await backend.poll(address, 0, 10)).map((m) => m.offset), [2]);
  assert.deepEqual((await backend.poll({ ...address, partition: 1 }, 0, 10)).map((m) => m.offset), [
    1,
  ]);
  assert.deepEqual(await backend.runRetention(), { deleted: 0 });
});

Deno.test("runRetention() counts header bytes toward the topic size", async () => {
  await using store = await openTestStore({ retentionMaxTopicBytes: 40 });
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 1 });
  // 1-byte payload + 1+5+1+20 = 27 header bytes → 28 bytes each; two exceed 40.
  const message = textMessage("x", { "mqtt1": "y".repeat(20) });
  await backend.append({ ...address, messages: [message] });
  await backend.append({ ...address, messages: [message] });
  assert.deepEqual(await backend.runRetention(), { deleted: 1 });
});

Deno.test("runRetention() deletes a stored batch whole: one commit to one partition", async () => {
  await using store = await openTestStore({ retentionMaxTopicBytes: 250 });
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 1 });
  // One append of three 100-byte messages is one stored batch of 300 bytes: over 250, it goes
  // whole (as Iggy deletes whole segments), and the next batch is kept.
  await backend.append({ ...address, messages: [1, 2, 3].map(() => sizedMessage(100)) });
  await backend.append({ ...address, messages: [sizedMessage(100)] });
  assert.deepEqual(await backend.runRetention(), { deleted: 3 });
  assert.deepEqual((await backend.poll(address, 0, 10)).map((m) => m.offset), [3]);
  assert.equal(await backend.nextOffset(address), 4);
});

Deno.test("runRetention() uses a topic's own expiry over the backend default", async () => {
  const clock = manualClock();
  await using store = await openTestStore({ retentionMaxAgeSeconds: 0, clock: clock.read });
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 1, messageExpiryMicros: HOUR_MICROS });
  await backend.createTopic("s", "forever", { partitions: 1 });
  await backend.append({ ...address, messages: [textMessage("a")] });
  await backend.append({ ...address, topic: "forever", messages: [textMessage("b")] });
  assert.deepEqual(await backend.runRetention(clock.now + 2 * HOUR_MICROS), { deleted: 1 });
});

Deno.test("runRetention() deletes in chunks and lets appends through between them", async () => {
  const clock = manualClock();
  // One message per transaction, so one stored batch per message: three chunks of batches.
  // In memory: no fsync and no checkpoint step may race the chunks this test counts on.
  await using store = await openTestStore({
    path: ":memory:",
    retentionMaxAgeSeconds: 1,
    clock: clock.read,
    maxAppendBatch: 1,
  });
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 1 });
  const total = CHUNK_RECORDS * 2 + 10;
  await Promise.all(
    Array.from(
      { length: total },
      () => backend.append({ ...address, messages: [sizedMessage(4)] }),
    ),
  );
  clock.now += HOUR_MICROS;
  const retention = backend.runRetention();
  // Queued while the first chunk runs; commits before retention finishes.
  const append = backend.append({ ...address, messages: [textMessage("during")] });
  let appendedFirst = false;
  await Promise.all([
    append.then(() => appendedFirst = true),
    retention.then(({ deleted }) => {
      assert.equal(deleted, total);
      assert.equal(appendedFirst, true, "the append committed between retention chunks");
    }),
  ]);
  assert.deepEqual((await backend.poll(address, 0, 10)).map((m) => m.offset), [total]);
});

Deno.test("runRetention() ages a message from its timestamp moved by the clock's forward steps since", async () => {
  let wallMs = 1_700_000_000_000;
  let monoMs = 0;
  const ageClock = new WallClock({ wall: () => wallMs, mono: () => monoMs });
  await using store = await openTestStore({
    retentionMaxAgeSeconds: 7 * 86_400,
    clock: () => wallMs * 1000,
    ageClock,
  });
  const { backend } = store;
  await backend.createTopic("s", "t", { partitions: 1 });
  await backend.append({ ...address, messages: [textMessage("before")] });
  wallMs += 20 * 86_400_000; // a clock 20 days behind is set right
  monoMs += 1_000;
  wallMs += 1_000;
  await backend.append({ ...address, messages: [textMessage("after")] });
  assert.deepEqual(await backend.runRetention(ageClock.nowMicros()), { deleted: 0 });
  // Seven real days on, the first is older than the limit and goes; the second stays.
  wallMs += 7 * 86_400_000 - 500;
  monoMs += 7 * 86_400_000 - 500;
  assert.deepEqual(await backend.runRetention(ageClock.nowMicros()), { deleted: 1 });
  assert.deepEqual((await backend.poll(address, 0, 10)).map((m) => m.offset), [1]);
});
