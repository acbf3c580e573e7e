import assert from "node:assert/strict";
import { ByteReader, fromHex, toHex, toUtf8 } from "./bytes.ts";
import {
  BATCH_HEADER_SIZE,
  type BatchMessage,
  decodeBatches,
  decodePollReply,
  decodeSendReply,
  encodeBatch,
  encodeSendBodyRaw,
  encodeSendMessages,
  FRAME_HEADER_SIZE,
  randomMessageId,
} from "./batch.ts";
import { loadHashes } from "../../base/xxhash.ts";

await loadHashes();

// Golden inputs (Rust-generated vectors recorded upstream in
// foreign/node/src/wire/message/message-batch.test.ts): two messages,
// id 7 at 1000 µs "first-payload" without headers, id 8 at 1050 µs "second-payload"
// with the raw user-header bytes "user-header-bytes".
const golden: BatchMessage[] = [
  {
    id: 7n,
    payload: toUtf8("first-payload"),
    userHeaders: new Uint8Array(0),
    originTimestampMicros: 1000n,
  },
  {
    id: 8n,
    payload: toUtf8("second-payload"),
    userHeaders: toUtf8("user-header-bytes"),
    originTimestampMicros: 1050n,
  },
];

function u64At(b: Uint8Array, at: number): bigint {
  return new DataView(b.buffer, b.byteOffset).getBigUint64(at, true);
}
function u32At(b: Uint8Array, at: number): number {
  return new DataView(b.buffer, b.byteOffset).getUint32(at, true);
}

Deno.test("encodeBatch() reproduces the golden batch length and checksums", () => {
  const batch = encodeBatch(golden);
  assert.equal(batch.length, 396);
  assert.equal(u64At(batch, 0), 0n, "partition_id");
  assert.equal(u64At(batch, 8), 0n, "base_offset");
  assert.equal(u64At(batch, 16), 0n, "base_timestamp");
  assert.equal(u64At(batch, 24), 1000n, "origin_timestamp = min origin");
  assert.equal(u64At(batch, 32), 396n, "batch_length");
  assert.equal(u64At(batch, 40), 0x7c260763c8381fa9n, "batch checksum");
  assert.equal(u32At(batch, 48), 2, "message_count");
  assert.ok(batch.subarray(52, 256).every((b) => b === 0), "bytes 52..256 are zero");
  const f1 = BATCH_HEADER_SIZE;
  assert.equal(u64At(batch, f1), 0x7596755a20b9d2bfn, "frame 1 checksum");
  const f2 = f1 + FRAME_HEADER_SIZE + 13;
  assert.equal(u64At(batch, f2), 0xc0b78e751c7e6bd6n, "frame 2 checksum");
});

Deno.test("encodeBatch() lays out frames: header, payload, then user headers", () => {
  const batch = encodeBatch(golden);
  const f2 = BATCH_HEADER_SIZE + FRAME_HEADER_SIZE + 13;
  assert.equal(u64At(batch, f2 + 8), 8n, "id low");
  assert.equal(u64At(batch, f2 + 16), 0n, "id high");
  assert.equal(u32At(batch, f2 + 24), 1, "offset_delta");
  assert.equal(u32At(batch, f2 + 28), 50, "timestamp_delta");
  assert.equal(u32At(batch, f2 + 32), 17, "user_headers_length");
  assert.equal(u32At(batch, f2 + 36), 14, "payload_length");
  assert.equal(u64At(batch, f2 + 40), 0n, "reserved");
  const tail = new TextDecoder().decode(batch.subarray(f2 + 48));
  assert.equal(tail, "second-payloaduser-header-bytes");
});

Deno.test("encodeSendBodyRaw() writes the golden send metadata", () => {
  // numeric stream 1, topic 2, Balanced partitioning, as in the golden vector
  const body = encodeSendBodyRaw(
    fromHex("01040100 0000"),
    fromHex("01040200 0000"),
    fromHex("0100"),
    golden,
  );
  assert.equal(toHex(body.subarray(0, 22)), "120000000104010000000104020000000100" + "02000000");
  assert.equal(body.length, 22 + 396);
});

Deno.test("encodeSendMessages() addresses by name with PartitionId partitioning", () => {
  const body = encodeSendMessages("s", "tp", 3, golden);
  // metadata_len = 3 (stream) + 4 (topic) + 6 (partitioning) + 4 (count) = 17
  assert.equal(
    toHex(body.subarray(0, 4 + 13 + 4)),
    "11000000" + "020173" + "02027470" + "020403000000" + "02000000",
  );
});

Deno.test("decodeBatches() reads back what encodeBatch() produced", () => {
  const batch = encodeBatch(golden);
  // the server stamps partition, base offset and base timestamp
  const v = new DataView(batch.buffer);
  v.setBigUint64(0, 3n, true);
  v.setBigUint64(8, 100n, true);
  v.setBigUint64(16, 5000n, true);
  const msgs = decodeBatches(new ByteReader(batch));
  assert.equal(msgs.length, 2);
  assert.deepEqual(msgs.map((m) => m.offset), [100, 101]);
  assert.deepEqual(msgs.map((m) => m.timestampMicros), [5000, 5000]);
  assert.deepEqual(msgs.map((m) => m.originTimestampMicros), [1000, 1050]);
  assert.deepEqual(msgs.map((m) => m.id), [7n, 8n]);
  assert.equal(msgs[0].checksum, 0x7596755a20b9d2bfn);
  assert.equal(new TextDecoder().decode(msgs[1].payload), "second-payload");
  assert.equal(new TextDecoder().decode(msgs[1].userHeaders), "user-header-bytes");
});

Deno.test("decodePollReply() reads the head then two concatenated batches", () => {
  const a = encodeBatch(golden);
  const b = encodeBatch(golden.slice(0, 1));
  new DataView(b.buffer).setBigUint64(8, 2n, true);
  const body = new Uint8Array(16 + a.length + b.length);
  const v = new DataView(body.buffer);
  v.setUint32(0, 3, true);
  v.setBigUint64(4, 2n, true);
  v.setUint32(12, 3, true);
  body.set(a, 16);
  body.set(b, 16 + a.length);
  const reply = decodePollReply(body);
  assert.equal(reply.partitionId, 3);
  assert.equal(reply.currentOffset, 2);
  assert.deepEqual(reply.messages.map((m) => m.offset), [0, 1, 2]);
});

Deno.test("decodePollReply() refuses a message past the partition's current offset (corrupted or forged)", () => {
  // A flipped bit in a batch's base offset moved a shared reader past every message up to it.
  const a = encodeBatch(golden);
  new DataView(a.buffer).setBigUint64(8, 1n << 40n, true);
  const body = new Uint8Array(16 + a.length);
  const v = new DataView(body.buffer);
  v.setBigUint64(4, 2n, true);
  v.setUint32(12, 2, true);
  body.set(a, 16);
  assert.throws(
    () => decodePollReply(body),
    /offset 1099511627776 past the partition's current offset 2/,
  );
});

Deno.test("decodePollReply() of an empty poll head gives no messages", () => {
  const body = new Uint8Array(16);
  assert.deepEqual(decodePollReply(body).messages, []);
});

Deno.test("decodeBatches() rejects truncated input and a non-zero reserved field", () => {
  const batch = encodeBatch(golden);
  assert.throws(() => decodeBatches(new ByteReader(batch.subarray(0, 300))), /Truncated/);
  const bad = batch.slice();
  bad[BATCH_HEADER_SIZE + 40] = 1;
  assert.throws(() => decodeBatches(new ByteReader(bad)), /reserved/);
});

Deno.test("decodeSendReply() gives the base offset, or null for count 0", () => {
  const body = new Uint8Array(24);
  const v = new DataView(body.buffer);
  v.setUint32(0, 1, true);
  v.setBigUint64(16, 42n, true);
  assert.equal(decodeSendReply(body), 42);
  assert.equal(decodeSendReply(new Uint8Array(4)), null);
});

Deno.test("randomMessageId() mints distinct non-zero u128 ids", () => {
  const a = randomMessageId();
  const b = randomMessageId();
  assert.notEqual(a, 0n);
  assert.notEqual(a, b);
  assert.ok(a < 1n << 128n);
});
