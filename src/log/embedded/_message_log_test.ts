import assert from "node:assert/strict";
import { BackendError } from "../port.ts";
import { BatchEncoder } from "./_batch.ts";
import { LOG_RECORD_HEADER_BYTES } from "./_log_record.ts";
import { type LogRun, MessageLog, type MessageLogOptions } from "./_message_log.ts";
import { readMessages } from "./_log_read.ts";
import { textMessage } from "../../../tests/helpers/embedded_store.ts";

const SEGMENT = 16 * 1024;

/** A log in a fresh temp directory; `await using` closes it and removes the directory. */
async function tempLog(overrides: Partial<MessageLogOptions> = {}) {
  const dir = await Deno.makeTempDir({ prefix: "message_log_test_" });
  const options: MessageLogOptions = {
    dir: `${dir}/log`,
    maxBytes: 64 * SEGMENT,
    segmentBytes: SEGMENT,
    floors: new Map(),
    ...overrides,
  };
  const opened: MessageLog[] = [];
  const open = async (more: Partial<MessageLogOptions> = {}) => {
    const log = await MessageLog.open({ ...options, ...more });
    opened.push(log);
    return log;
  };
  return {
    dir: options.dir,
    log: await open(),
    open,
    async [Symbol.asyncDispose]() {
      for (const log of opened) await log.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

/** Appends one record per [topicId, partition, bodies] run, in one transaction. */
async function append(
  log: MessageLog,
  runs: readonly (readonly [number, number, readonly string[]])[],
  timestampMicros = 1,
): Promise<number[]> {
  const encoder = new BatchEncoder();
  encoder.begin(1024);
  const logRuns: LogRun[] = [];
  for (const [topicId, partition, bodies] of runs) {
    const at = encoder.position;
    encoder.reserve(LOG_RECORD_HEADER_BYTES);
    let size = 0;
    for (const body of bodies) size += encoder.add(textMessage(body), timestampMicros);
    const dataBytes = encoder.position - at - LOG_RECORD_HEADER_BYTES;
    logRuns.push({ topicId, partition, count: bodies.length, size, at, dataBytes });
  }
  const data = new Uint8Array(encoder.take(), 0, encoder.position);
  const bases = await log.append(data, logRuns, timestampMicros);
  await log.sync();
  return bases;
}

function bodies(log: MessageLog, topicId: number, partition: number, from = 0): string[] {
  return readMessages(log, topicId, partition, from, 1_000_000).map((m) =>
    `${m.offset}:${new TextDecoder().decode(m.payload)}`
  );
}

Deno.test("MessageLog appends across segments and reads the same back after reopen", async () => {
  await using t = await tempLog();
  const expected: string[] = [];
  for (let i = 0; i < 200; i++) {
    const body = `message-${i}-`.padEnd(200, "x");
    // Partition 1 of topic 7 gets one message in ten, interleaved with partition 0.
    const runs: [number, number, string[]][] = [[7, 0, [body]]];
    if (i % 10 === 0) runs.push([7, 1, [`rare-${i}`]]);
    const bases = await append(t.log, runs);
    assert.equal(bases[0], i);
    expected.push(`${i}:${body}`);
  }
  assert.ok(t.log.segmentCount > 2, `only ${t.log.segmentCount} segments`);
  assert.deepEqual(bodies(t.log, 7, 0), expected);
  assert.deepEqual(bodies(t.log, 7, 0, 150), expected.slice(150));
  assert.equal(bodies(t.log, 7, 1).length, 20);
  await t.log.close();
  const again = await t.open();
  assert.deepEqual(bodies(again, 7, 0), expected);
  assert.deepEqual(bodies(again, 7, 1, 19), ["19:rare-190"]);
  assert.equal(again.partition(7, 0).next, 200);
  assert.deepEqual(await append(again, [[7, 0, ["after"]]]), [200]);
});

Deno.test("MessageLog drops a torn last record at open and never reads an older epoch's record after the new ones", async () => {
  await using t = await tempLog();
  await append(t.log, [[1, 0, ["aaaa"]]]);
  await append(t.log, [[1, 0, ["bbbb"]]]);
  await append(t.log, [[1, 0, ["cccc"]]]);
  await t.log.close();
  // Tear the second record: one byte of its batch changes, so its checksum fails.
  const [segment] = [...Deno.readDirSync(t.dir)].map((e) => `${t.dir}/${e.name}`).sort();
  const bytes = await Deno.readFile(segment);
  const view = new DataView(bytes.buffer);
  const first = LOG_RECORD_HEADER_BYTES + view.getUint32(4, true);
  const second = LOG_RECORD_HEADER_BYTES + view.getUint32(first + 4, true);
  bytes[first + second - 1] ^= 0xff; // the last payload byte of the second record
  await Deno.writeFile(segment, bytes);

  const reopened = await t.open();
  assert.deepEqual(bodies(reopened, 1, 0), ["0:aaaa"], "the log ends before the torn record");
  // The new record lands exactly where the torn one was; the intact "cccc" of the earlier
  // epoch follows it byte for byte, and must stay out of the log.
  assert.deepEqual(await append(reopened, [[1, 0, ["dddd"]]]), [1]);
  assert.deepEqual(bodies(reopened, 1, 0), ["0:aaaa", "1:dddd"]);
  await reopened.close();
  const third = await t.open();
  assert.deepEqual(bodies(third, 1, 0), ["0:aaaa", "1:dddd"]);
  assert.equal(third.partition(1, 0).next, 2);
});

Deno.test("MessageLog fills its bound exactly and refuses what would pass it with full", async () => {
  // Three segments and half of one: the last segment is made to fit.
  await using t = await tempLog({ maxBytes: 3 * SEGMENT + 8192 });
  let appended = 0;
  const body = "y".repeat(1000);
  for (;;) {
    try {
      await append(t.log, [[1, 0, [body]]]);
      appended++;
    } catch (e) {
      assert.ok(e instanceof BackendError);
      assert.equal(e.code, "full");
      break;
    }
    assert.ok(appended < 1000, "never full");
  }
  assert.ok(appended >= 30, `only ${appended} fitted`);
  assert.equal(t.log.bytes, 3 * SEGMENT + 8192);
  // Nothing of the refused append is visible.
  assert.equal(t.log.partition(1, 0).next, appended);
  assert.equal(bodies(t.log, 1, 0).length, appended);
});

Deno.test("MessageLog deletes a segment only once every partition in it has dropped its records", async () => {
  await using t = await tempLog();
  const body = "z".repeat(2000);
  // Topic 1 fills segments; topic 2 has one record in the first segment.
  await append(t.log, [[1, 0, [body]], [2, 0, ["keep"]]]);
  for (let i = 0; i < 30; i++) await append(t.log, [[1, 0, [body]]]);
  const segments = t.log.segmentCount;
  assert.ok(segments >= 3);
  const p1 = t.log.partition(1, 0);
  assert.deepEqual(t.log.dropOldest(p1, () => true), { messages: 31, records: 31 });
  assert.deepEqual(bodies(t.log, 1, 0), []);
  assert.equal(p1.next, 31);
  // The first segment still holds topic 2's record; the others (but the active one) can go.
  assert.equal(await t.log.deleteRetainedOut(), segments - 2);
  assert.deepEqual(bodies(t.log, 2, 0), ["0:keep"]);
  t.log.dropOldest(t.log.partition(2, 0), () => true);
  assert.equal(await t.log.deleteRetainedOut(), 1);
  assert.equal(t.log.segmentCount, 1);
  assert.deepEqual(await append(t.log, [[1, 0, ["next"]]]), [31]);
});

Deno.test("MessageLog read-only sees what the writer appends after it opened", async () => {
  await using t = await tempLog();
  await append(t.log, [[1, 0, ["one"]]]);
  const reader = await t.open({ readOnly: true });
  assert.deepEqual(bodies(reader, 1, 0), ["0:one"]);
  const body = "w".repeat(3000);
  for (let i = 0; i < 10; i++) await append(t.log, [[1, 0, [body]]]);
  reader.refresh();
  assert.equal(bodies(reader, 1, 0).length, 11);
  assert.equal(reader.partition(1, 0).next, 11);
  await assert.rejects(append(reader, [[1, 0, ["x"]]]), BackendError);
});

Deno.test("MessageLog reopened again and again keeps one spare segment, not one per start", async () => {
  await using t = await tempLog();
  await append(t.log, [[1, 0, ["one"]]]);
  await t.log.close();
  for (let i = 0; i < 3; i++) await (await t.open()).close();
  const files = [...Deno.readDirSync(t.dir)].length;
  assert.ok(files <= 2, `${files} segment files after four opens`);
  const last = await t.open();
  assert.deepEqual(await append(last, [[1, 0, ["two"]]]), [1]);
  assert.deepEqual(bodies(last, 1, 0), ["0:one", "1:two"]);
});

Deno.test("MessageLog segments start at 1 MiB and double up to the segment size", async () => {
  await using t = await tempLog({ segmentBytes: 4 * 1024 * 1024, maxBytes: 64 * 1024 * 1024 });
  const body = "s".repeat(60_000);
  for (let i = 0; i < 70; i++) await append(t.log, [[1, 0, [body]]]); // ~4.2 MB
  const sizes = [...Deno.readDirSync(t.dir)].map((e) => e.name).sort().map((name) =>
    Deno.statSync(`${t.dir}/${name}`).size / (1024 * 1024)
  );
  // 1 + 2 MiB filled, the 4 MiB one in use; a spare of 4 MiB may be on its way.
  assert.deepEqual(sizes.slice(0, 3), [1, 2, 4]);
  assert.ok(sizes.length <= 4 && sizes.slice(3).every((s) => s <= 4), `sizes ${sizes}`);
  assert.equal(bodies(t.log, 1, 0).length, 70);
});

Deno.test("MessageLog's sparse index stays bounded and finds every offset", async () => {
  await using t = await tempLog({ segmentBytes: 1024 * 1024, maxBytes: 64 * 1024 * 1024 });
  const busy = "b".repeat(500);
  // Partition 0 writes ~2.6 MB in small records; partition 1 one record in 50, interleaved.
  for (let i = 0; i < 5000; i++) {
    const runs: [number, number, string[]][] = [[1, 0, [`${i}:${busy}`]]];
    if (i % 50 === 0) runs.push([1, 1, [`slow-${i}`]]);
    await append(t.log, runs);
  }
  const logBytes = t.log.partition(1, 0).endPos;
  const entries = (p: number) => {
    const part = t.log.partition(1, p);
    return part.indexOffsets.length - part.indexHead;
  };
  // One entry per 16 KiB of a partition's own records, or per 256 KiB of log, plus the first.
  assert.ok(entries(0) <= logBytes / (16 * 1024) + 2, `${entries(0)} entries for partition 0`);
  assert.ok(entries(1) <= logBytes / (256 * 1024) + 2, `${entries(1)} entries for partition 1`);
  for (const offset of [0, 1, 17, 999, 2500, 4321, 4999]) {
    const [m] = readMessages(t.log, 1, 0, offset, 1);
    assert.equal(m.offset, offset);
    assert.ok(new TextDecoder().decode(m.payload).startsWith(`${offset}:`));
  }
  for (const offset of [0, 33, 99]) {
    const [m] = readMessages(t.log, 1, 1, offset, 1);
    assert.equal(new TextDecoder().decode(m.payload), `slow-${offset * 50}`);
  }
});
