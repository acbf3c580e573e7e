import assert from "node:assert/strict";
import type { EncodedMessages } from "../log/port.ts";
import type { PartitionBytes } from "../log/local_log.ts";
import { BacklogBytes } from "./backlog_bytes.ts";

const ADDRESS = { stream: "s", topic: "t", partition: 0 };
/** Message `i` of the test partition is stored in `100 + i` bytes. */
const size = (i: number) => 100 + i;
const sum = (from: number, to: number) => {
  let n = 0;
  for (let i = from; i < to; i++) n += size(i);
  return n;
};

/** A run of messages `[from, from + count)` as a read (or a confirmed send) gives it. */
function run(from: number, count: number): EncodedMessages {
  return {
    pieces: [],
    spans: new Uint32Array(0),
    count,
    firstOffset: from,
    firstTimestampMicros: 0,
    payloadBytes: 0,
    storedBytes: sum(from, from + count),
  };
}

/** A partition of `next` messages, the first `start` retained out, all noted since open. */
const extent = (start: number, next: number): PartitionBytes => ({
  start,
  next,
  retainedBytes: sum(start, next),
  appendedBytes: sum(start, next),
});

/** A local log whose reads hand out runs of at most 7 messages, and count the reads. */
function local(end: number) {
  const reads = { n: 0 };
  return {
    reads,
    log: {
      pollEncoded: (_a: unknown, from: number, count: number) => {
        reads.n++;
        const n = Math.min(count, 7, end - from);
        return Promise.resolve(n > 0 ? run(from, n) : null);
      },
    },
  };
}

Deno.test("BacklogBytes knows the bytes without a read when nothing retained is forwarded, and after each send", () => {
  const b = new BacklogBytes();
  const never = () => Promise.reject(new Error("no count needed"));
  b.observe(extent(10, 50), 10, never);
  assert.equal(b.bytes, sum(10, 50));
  b.sent(run(10, 15));
  assert.equal(b.bytes, sum(25, 50));
  b.observe(extent(10, 60), 25, never);
  assert.equal(b.bytes, sum(25, 60));
  b.sent(run(25, 35));
  b.observe(extent(10, 60), 60, never);
  assert.equal(b.bytes, 0);
});

Deno.test("BacklogBytes counts the backlog once, in batches, while the lane sends on", async () => {
  const b = new BacklogBytes();
  const l = local(100);
  const e = extent(0, 100); // 40 forwarded before a restart, still retained
  b.observe(e, 40, () => b.count(l.log, ADDRESS, 40, e, () => false));
  assert.equal(b.bytes, 0, "not known before the count");
  b.sent(run(40, 5)); // a send confirmed while the count runs
  await b.idle();
  assert.equal(l.reads.n, Math.ceil(60 / 7));
  assert.equal(b.bytes, sum(45, 100));
  b.observe(e, 45, () => Promise.reject(new Error("counted once")));
  assert.equal(b.bytes, sum(45, 100));
});

Deno.test("BacklogBytes drops a count that a skip overtook, and counts again from the new position", async () => {
  const b = new BacklogBytes();
  const l = local(100);
  const e = extent(0, 100);
  b.observe(e, 40, () => b.count(l.log, ADDRESS, 40, e, () => false));
  b.skipped(); // found upstream: the lane jumps ahead
  await b.idle();
  assert.equal(b.bytes, 0, "the overtaken count is not used");
  b.observe(e, 70, () => b.count(l.log, ADDRESS, 70, e, () => false));
  await b.idle();
  assert.equal(b.bytes, sum(70, 100));
});
