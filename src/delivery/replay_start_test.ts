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
  } finally {
    await backend.close();
    await Deno.remove(dir, { recursive: true });
  }
});
