/**
 * The tail cache against the file: two logs given the same random transactions (1–3
 * partitions each, mostly small, now and then one over the cache's bound), one with a tail
 * cache of a few sizes and one without, must answer every read the same, decoded or encoded,
 * and an encoded read must hold what it read after later writes wrap the cache's ring.
 */
import assert from "node:assert/strict";
import { BatchEncoder, decodeEncoded } from "./_batch.ts";
import { LOG_RECORD_HEADER_BYTES } from "./_log_record.ts";
import { type LogRun, MessageLog } from "./_message_log.ts";
import { readEncoded, readMessages } from "./_log_read.ts";
import type { EncodedMessages } from "../port.ts";
import { textMessage } from "../../../tests/helpers/embedded_store.ts";

/** A seeded generator: every run draws the same transactions and reads. */
function random(seed: number) {
  const next = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
  return { next, int: (n: number) => Math.floor(next() * n) };
}

/** Appends one transaction: per run `[partition, bodies]`, every run on topic 1. */
function append(log: MessageLog, runs: [number, string[]][]): Promise<number[]> {
  const encoder = new BatchEncoder();
  encoder.begin(1024);
  const logRuns: LogRun[] = [];
  for (const [partition, bodies] of runs) {
    const at = encoder.position;
    encoder.reserve(LOG_RECORD_HEADER_BYTES);
    let size = 0;
    for (const body of bodies) {
      const headers = { "mqtt.topic": `t/${body.length}`, "u": "é".repeat(body.length % 70) };
      size += encoder.add(textMessage(body, headers), 1);
    }
    const dataBytes = encoder.position - at - LOG_RECORD_HEADER_BYTES;
    logRuns.push({ topicId: 1, partition, count: bodies.length, size, at, dataBytes });
  }
  return log.append(new Uint8Array(encoder.take(), 0, encoder.position), logRuns, 1);
}

const plain = (ms: { payload: Uint8Array; headers: ReadonlyMap<string, string> }[]) =>
  ms.map((m) => `${new TextDecoder().decode(m.payload)}|${JSON.stringify([...m.headers])}`);

function open(tailCacheBytes: number): Promise<MessageLog> {
  const o = { dir: ":memory:", maxBytes: 64 << 20, segmentBytes: 1 << 20, floors: new Map() };
  return MessageLog.open({ ...o, tailCacheBytes });
}

for (const bound of [600, 2000, 5000]) {
  Deno.test(`reads from a tail cache of ${bound} bytes are the file's, decoded and encoded`, async () => {
    const r = random(12345 + bound);
    const cached = await open(bound);
    const file = await open(0);
    try {
      let n = 0;
      // An encoded read kept while later transactions are written (the forwarder's send in
      // flight): its pieces must still hold what was read, though the ring is written over.
      let kept: { read: EncodedMessages; plain: string[] } | undefined;
      for (let t = 0; t < 400; t++) {
        const runs = [0, 1, 2].filter(() => r.next() < 0.6).map((p): [number, string[]] => {
          const count = 1 + r.int(r.next() < 0.05 ? 60 : 6);
          return [p, Array.from({ length: count }, () => `m${n++}`.padEnd(1 + r.int(40), "x"))];
        });
        if (runs.length === 0) continue;
        assert.deepEqual(await append(cached, runs), await append(file, runs));
        if (kept) assert.deepEqual(plain(decodeEncoded(kept.read)), kept.plain);
        for (let q = 0; q < 5; q++) {
          const p = r.int(3);
          const from = Math.max(0, cached.partition(1, p).next - r.int(80));
          const limit = 1 + r.int(30);
          const maxBytes = 1 + r.int(400);
          const decoded = readMessages(cached, 1, p, from, limit);
          assert.deepEqual(plain(decoded), plain(readMessages(file, 1, p, from, limit)));
          const a = readEncoded(cached, 1, p, from, limit, maxBytes);
          const b = readEncoded(file, 1, p, from, limit, maxBytes);
          assert.equal(a === null, b === null);
          if (a === null || b === null) continue;
          assert.deepEqual([a.firstOffset, a.count, a.payloadBytes], [
            b.firstOffset,
            b.count,
            b.payloadBytes,
          ]);
          assert.deepEqual(plain(decodeEncoded(a)), plain(decodeEncoded(b)));
          kept = { read: a, plain: plain(decodeEncoded(b)) };
        }
      }
    } finally {
      await cached.close();
      await file.close();
    }
  });
}
