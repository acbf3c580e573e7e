import assert from "node:assert/strict";
import { BackendError } from "../port.ts";
import type { EmbeddedBackend } from "./backend.ts";
import { openTestStore, sizedMessage } from "../../../tests/helpers/embedded_store.ts";

const address = { stream: "s", topic: "t", partition: 0 };
const KIB = 1024;
const MIB = 1024 * KIB;

/** A payload of `size` bytes that says which message it is (its first 4 bytes: `n`). */
function numbered(n: number, size: number) {
  const m = sizedMessage(size);
  new DataView(m.payload.buffer).setUint32(0, n, true);
  return m;
}

/** `count` appends of one `size`-byte message each, queued together (one group commit). */
function burst(backend: EmbeddedBackend, count: number, size: number, first = 0) {
  return Promise.allSettled(
    Array.from(
      { length: count },
      (_, i) => backend.append({ ...address, messages: [numbered(first + i, size)] }),
    ),
  );
}

/** Every message of the partition, read back in order: the number each one carries. */
async function readBack(backend: EmbeddedBackend): Promise<number[]> {
  const all = await backend.poll(address, 0, 100_000);
  return all.map((m, i) => {
    assert.equal(m.offset, i, "offsets contiguous from 0");
    return new DataView(m.payload.buffer, m.payload.byteOffset).getUint32(0, true);
  });
}

Deno.test("a burst bigger than the room a new segment may take, within the store's free room, is stored whole", async () => {
  // 4 MiB store: 512 KiB segments. One small message first, then 60 × 64 KiB together
  // (3.9 MiB): more than a new segment may take under the bound (3.5 MiB), less than that plus
  // what is left of the active segment.
  await using store = await openTestStore({ maxStoreBytes: 4 * MIB });
  await store.backend.createTopic("s", "t", { partitions: 1 });
  await store.backend.append({ ...address, messages: [numbered(0, 100)] });
  const results = await burst(store.backend, 60, 64 * KIB, 1);
  const refused = results.filter((r) => r.status === "rejected");
  assert.deepEqual(refused, [], "no append of the burst refused");
  assert.deepEqual(
    results.map((r) => r.status === "fulfilled" && r.value.baseOffset),
    Array.from({ length: 60 }, (_, i) => i + 1),
  );
  await store.backend.close();
  const reopened = store.reopen();
  await reopened.open();
  assert.deepEqual(await readBack(reopened), Array.from({ length: 61 }, (_, i) => i));
});

Deno.test("a burst bigger than the whole store: what fits is stored, in order, the rest refused as full", async () => {
  // 1 MiB store (the smallest bound): 16 × 64 KiB with their framing cannot all fit.
  await using store = await openTestStore({ maxStoreBytes: MIB });
  await store.backend.createTopic("s", "t", { partitions: 1 });
  const results = await burst(store.backend, 16, 64 * KIB);
  const stored = results.findIndex((r) => r.status === "rejected");
  assert.ok(stored >= 12, `only ${stored} of 16 stored`);
  results.forEach((r, i) => {
    if (i < stored) assert.deepEqual(r.status === "fulfilled" && r.value, { baseOffset: i });
    else {
      assert.equal(r.status, "rejected", `append ${i} after a refused one`);
      const e = (r as PromiseRejectedResult).reason;
      assert.ok(e instanceof BackendError && e.code === "full", String(e));
    }
  });
  await store.backend.close();
  const reopened = store.reopen();
  await reopened.open();
  assert.deepEqual(await readBack(reopened), Array.from({ length: stored }, (_, i) => i));
});

Deno.test("a burst of hundreds of 16 KiB messages after earlier traffic is stored whole and read back after a restart", async () => {
  // 8 MiB store, 1 MiB segments: 30 messages half fill the first; then 460 together (7.5 MiB):
  // more than a new segment may take under the bound (7 MiB), within the store's free room.
  await using store = await openTestStore({ maxStoreBytes: 8 * MIB });
  await store.backend.createTopic("s", "t", { partitions: 1 });
  for (let i = 0; i < 30; i++) {
    await store.backend.append({ ...address, messages: [numbered(i, 16 * KIB)] });
  }
  const results = await burst(store.backend, 460, 16 * KIB, 30);
  assert.deepEqual(results.filter((r) => r.status === "rejected"), []);
  await store.backend.close();
  const reopened = store.reopen();
  await reopened.open();
  assert.deepEqual(await readBack(reopened), Array.from({ length: 490 }, (_, i) => i));
});

Deno.test("a message of limits.max_packet_bytes (1 MiB) is stored in a segment sized for it; one bigger than the whole store is refused naming the keys", async () => {
  // 8 MiB store, 1 MiB segments: five 1 MiB messages together each take a segment of their own.
  await using store = await openTestStore({ maxStoreBytes: 8 * MIB });
  await store.backend.createTopic("s", "t", { partitions: 1 });
  await store.backend.append({ ...address, messages: [numbered(0, 100)] });
  const results = await burst(store.backend, 5, MIB, 1);
  assert.deepEqual(results.filter((r) => r.status === "rejected"), []);
  await store.backend.close();
  const reopened = store.reopen();
  await reopened.open();
  assert.deepEqual(await readBack(reopened), [0, 1, 2, 3, 4, 5]);

  // The smallest bound (1 MiB) cannot hold a 1 MiB message with its framing, even empty.
  await using tiny = await openTestStore({ maxStoreBytes: MIB });
  await tiny.backend.createTopic("s", "t", { partitions: 1 });
  await assert.rejects(
    tiny.backend.append({ ...address, messages: [sizedMessage(MIB)] }),
    (e) => {
      assert.ok(e instanceof BackendError && e.code === "full", String(e));
      assert.match(
        e.message,
        /cannot fit in embedded\.max_store_bytes \(1048576 bytes\) even with/,
      );
      assert.match(e.message, /limits\.max_packet_bytes/);
      return true;
    },
  );
  // The store itself is not full: /ready stays 200 (the refusal is the appender's to log), and a
  // smaller message goes in.
  assert.equal(tiny.backend.health().ready, true);
  assert.deepEqual(await tiny.backend.append({ ...address, messages: [sizedMessage(512 * KIB)] }), {
    baseOffset: 0,
  });
  assert.equal(tiny.backend.health().ready, true);
});
