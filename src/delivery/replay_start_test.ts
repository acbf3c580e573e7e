import assert from "node:assert/strict";
import { EmbeddedBackend } from "../log/embedded/mod.ts";
import { replayStartOffset } from "./replay_start.ts";

Deno.test("replayStartOffset() finds the first message at or after a time, earliest and latest", async () => {
  const dir = await Deno.makeTempDir({ prefix: "replay_start_test_" });
  let micros = 1000;
  const backend = new EmbeddedBackend({
    path: `${dir}/store.db`,
    users: [],
    maxStoreBytes: 64 << 20,
    retentionMaxAgeSeconds: 0,
    retentionMaxTopicBytes: 0,
    retentionIntervalMs: 3_600_000,
    maxAppendBatch: 1,
    writerThread: "in-process",
    clock: () => micros,
  });
  await backend.open();
  try {
    await backend.createTopic("s", "t", { partitions: 1 });
    const a = { stream: "s", topic: "t", partition: 0 };
    for (let i = 0; i < 20; i++) {
      micros = 1000 + i * 10; // offset i at 1000 + 10 i µs
      await backend.append({
        ...a,
        messages: [{ payload: new Uint8Array([i]), headers: new Map() }],
      });
    }
    assert.equal(await replayStartOffset(backend, a, { kind: "earliest" }), 0);
    assert.equal(await replayStartOffset(backend, a, { kind: "latest" }), null);
    assert.equal(await replayStartOffset(backend, a, { kind: "time", micros: 0 }), 0);
    assert.equal(await replayStartOffset(backend, a, { kind: "time", micros: 1075 }), 8);
    assert.equal(await replayStartOffset(backend, a, { kind: "time", micros: 1080 }), 8);
    assert.equal(await replayStartOffset(backend, a, { kind: "time", micros: 9999 }), 20);
    // The clock steps back: offsets 20..29 are stamped below offset 0. Asked for a time before
    // everything stamped before the step (and after some of what came after it), the replay
    // starts at the oldest message: both sides of the step come, in their order.
    for (let i = 0; i < 10; i++) {
      micros = 500 + i * 100; // 500 … 1400: below, inside and above the first stretch's range
      await backend.append({
        ...a,
        messages: [{ payload: new Uint8Array([20 + i]), headers: new Map() }],
      });
    }
    assert.equal(await replayStartOffset(backend, a, { kind: "time", micros: 900 }), 0);
    assert.equal(await replayStartOffset(backend, a, { kind: "time", micros: 1000 }), 0);
    // Above everything before the step: the first message after the step stamped at or after it.
    assert.equal(await replayStartOffset(backend, a, { kind: "time", micros: 1250 }), 28);
  } finally {
    await backend.close();
    await Deno.remove(dir, { recursive: true });
  }
});
