/**
 * Message batches: the SEND_MESSAGES body with its 256-byte batch header and
 * 48-byte frames sealed by XXH3-64 checksums, and the decoding of batches in a POLL_MESSAGES
 * reply. The server drops a badly sealed batch without replying, so these bytes must be
 * exact; `batch_test.ts` checks them against Rust-generated golden vectors.
 *
 * @module
 */

import { ByteReader, ByteWriter, DecodeError } from "./bytes.ts";
import type { StoredMessage } from "../port.ts";
import {
  decodeUserHeaders,
  identifierLength,
  PARTITION_ID_PARTITIONING_LENGTH,
  writeIdentifier,
  writePartitionIdPartitioning,
} from "./encoding.ts";
import { xxh3_64 } from "../../base/xxhash.ts";

/** Size of the batch header. */
export const BATCH_HEADER_SIZE = 256;
/** Size of a message frame header. */
export const FRAME_HEADER_SIZE = 48;
const U32_MAX = 0xffff_ffff;

/** One message as it goes into a batch. */
export interface BatchMessage {
  /** Client-minted u128 id. */
  readonly id: bigint;
  readonly payload: Uint8Array;
  /** Encoded user-header TLV (may be empty). */
  readonly userHeaders: Uint8Array;
  /** Client time of the message, µs since the epoch. */
  readonly originTimestampMicros: bigint;
}

/** A random non-zero u128 message id. */
export function randomMessageId(): bigint {
  const b = new Uint8Array(16);
  for (;;) {
    crypto.getRandomValues(b);
    let v = 0n;
    for (const x of b) v = (v << 8n) | BigInt(x);
    if (v !== 0n) return v;
  }
}

function frameLength(m: BatchMessage): number {
  return FRAME_HEADER_SIZE + m.payload.length + m.userHeaders.length;
}

/** Encodes messages into one sealed batch: 256-byte header, then one frame per message. */
export function encodeBatch(messages: readonly BatchMessage[]): Uint8Array {
  if (messages.length === 0) throw new RangeError("A batch must hold at least one message");
  let origin = messages[0].originTimestampMicros;
  for (const m of messages) if (m.originTimestampMicros < origin) origin = m.originTimestampMicros;
  const length = messages.reduce((n, m) => n + frameLength(m), BATCH_HEADER_SIZE);

  const out = new Uint8Array(length);
  const v = new DataView(out.buffer);
  const checksums: Uint8Array = new Uint8Array(messages.length * 8);
  const cv = new DataView(checksums.buffer);
  let at = BATCH_HEADER_SIZE;
  messages.forEach((m, i) => {
    const delta = m.originTimestampMicros - origin;
    if (delta > BigInt(U32_MAX)) {
      throw new RangeError("Messages of one batch must lie within u32::MAX µs of each other");
    }
    v.setBigUint64(at + 8, m.id & 0xffff_ffff_ffff_ffffn, true);
    v.setBigUint64(at + 16, m.id >> 64n, true);
    v.setUint32(at + 24, i, true); // offset_delta
    v.setUint32(at + 28, Number(delta), true); // timestamp_delta
    v.setUint32(at + 32, m.userHeaders.length, true);
    v.setUint32(at + 36, m.payload.length, true);
    // reserved u64 at +40 stays zero; payload precedes user headers
    out.set(m.payload, at + FRAME_HEADER_SIZE);
    out.set(m.userHeaders, at + FRAME_HEADER_SIZE + m.payload.length);
    const end = at + frameLength(m);
    const sum = xxh3_64(out.subarray(at + 8, end));
    v.setBigUint64(at, sum, true);
    cv.setBigUint64(i * 8, sum, true);
    at = end;
  });

  // partition_id, base_offset, base_timestamp stay 0 (the server fills them)
  v.setBigUint64(24, origin, true);
  v.setBigUint64(32, BigInt(length), true);
  v.setUint32(48, messages.length, true);
  const sealed = new Uint8Array(44);
  sealed.set(out.subarray(0, 40));
  new DataView(sealed.buffer).setUint32(40, messages.length, true);
  v.setBigUint64(40, xxh3_64(sealed, checksums), true);
  return out;
}

/**
 * SEND_MESSAGES body from pre-encoded stream id, topic id and partitioning:
 * `[metadata_len:u32][stream][topic][partitioning][count:u32][batch]`.
 */
export function encodeSendBodyRaw(
  streamId: Uint8Array,
  topicId: Uint8Array,
  partitioning: Uint8Array,
  messages: readonly BatchMessage[],
): Uint8Array {
  const batch = encodeBatch(messages);
  const w = new ByteWriter(32 + streamId.length + topicId.length + batch.length);
  w.u32(streamId.length + topicId.length + partitioning.length + 4);
  w.bytes(streamId).bytes(topicId).bytes(partitioning).u32(messages.length).bytes(batch);
  return w.finish();
}

/** SEND_MESSAGES body addressed by names with Partitioning = PartitionId. */
export function encodeSendMessages(
  stream: string,
  topic: string,
  partition: number,
  messages: readonly BatchMessage[],
): Uint8Array {
  const w = new ByteWriter(
    identifierLength(stream) + identifierLength(topic) + PARTITION_ID_PARTITIONING_LENGTH,
  );
  writeIdentifier(w, stream);
  const s = w.length;
  writeIdentifier(w, topic);
  const t = w.length;
  writePartitionIdPartitioning(w, partition);
  const head = w.finish();
  return encodeSendBodyRaw(head.subarray(0, s), head.subarray(s, t), head.subarray(t), messages);
}

/** First offset from a SEND_MESSAGES reply, or null when the server confirmed without offsets. */
export function decodeSendReply(body: Uint8Array): number | null {
  if (body.length === 0) return null;
  const r = new ByteReader(body);
  const count = r.u32("confirmation count");
  if (count === 0) return null;
  r.skip(12, "confirmation ids");
  return r.u64n("base_offset");
}

/** One message decoded from a polled batch. */
export interface PolledMessage {
  readonly id: bigint;
  readonly offset: number;
  /** Server append time (batch base timestamp), µs. */
  readonly timestampMicros: number;
  /** Client time of the message, µs. */
  readonly originTimestampMicros: number;
  readonly checksum: bigint;
  readonly payload: Uint8Array;
  readonly userHeaders: Uint8Array;
}

/** Decodes every batch from the reader's position to its end. */
export function decodeBatches(r: ByteReader): PolledMessage[] {
  const out: PolledMessage[] = [];
  while (r.remaining > 0) {
    const start = r.position;
    r.skip(8, "batch partition_id");
    const baseOffset = r.u64("batch base_offset");
    const baseTimestamp = r.u64n("batch base_timestamp");
    const origin = r.u64("batch origin_timestamp");
    const length = r.u64n("batch length");
    r.skip(8, "batch checksum");
    const count = r.u32("batch message_count");
    r.skip(BATCH_HEADER_SIZE - 52, "batch header padding");
    if (count === 0) throw new DecodeError("Iggy sent an empty message batch");
    for (let i = 0; i < count; i++) {
      const checksum = r.u64("frame checksum");
      const lo = r.u64("frame id");
      const id = lo | (r.u64("frame id") << 64n);
      const offsetDelta = r.u32("offset_delta");
      const timestampDelta = r.u32("timestamp_delta");
      const headersLength = r.u32("user_headers_length");
      const payloadLength = r.u32("payload_length");
      if (r.u64("frame reserved") !== 0n) throw new DecodeError("Frame reserved field not zero");
      const payload = r.bytes(payloadLength, "payload");
      const userHeaders = r.bytes(headersLength, "user headers");
      out.push({
        id,
        offset: Number(baseOffset + BigInt(offsetDelta)),
        timestampMicros: baseTimestamp,
        originTimestampMicros: Number(origin + BigInt(timestampDelta)),
        checksum,
        payload,
        userHeaders,
      });
    }
    if (r.position - start !== length) {
      throw new DecodeError(`Batch length ${length} disagrees with ${r.position - start} bytes`);
    }
  }
  return out;
}

/** A decoded POLL_MESSAGES reply. */
export interface PollReply {
  readonly partitionId: number;
  readonly currentOffset: number;
  readonly messages: PolledMessage[];
}

/** Decodes `[partition_id:u32][current_offset:u64][count:u32]` then batches to the end. */
export function decodePollReply(body: Uint8Array): PollReply {
  if (body.length === 0) return { partitionId: 0, currentOffset: 0, messages: [] };
  const r = new ByteReader(body);
  const partitionId = r.u32("partition_id");
  const currentOffset = r.u64n("current_offset");
  r.u32("messages_count");
  return checkPolledOffsets({ partitionId, currentOffset, messages: decodeBatches(r) });
}

/**
 * Refuses a poll reply with a message past the partition's current offset, which no partition
 * holds: its offset is corrupted (or forged), and taken as is it would move a reader, a catch-up
 * or a read-back past every message up to it.
 */
export function checkPolledOffsets<T extends PollReply>(reply: T): T {
  for (const m of reply.messages) {
    if (m.offset > reply.currentOffset) {
      throw new DecodeError(
        `Iggy sent message offset ${m.offset} past the partition's current offset ${reply.currentOffset}`,
      );
    }
  }
  return reply;
}

/**
 * The port's messages of a poll reply: those from `fromOffset` on (a reply may begin earlier,
 * at its batch's first message), at most `count`, with their user headers decoded.
 */
export function storedMessagesOf(
  reply: PollReply,
  partition: number,
  fromOffset: number,
  count: number,
): StoredMessage[] {
  return reply.messages
    .filter((m) => m.offset >= fromOffset)
    .slice(0, count)
    .map((m) => ({
      partition,
      offset: m.offset,
      timestampMicros: m.timestampMicros,
      payload: m.payload,
      headers: decodeUserHeaders(m.userHeaders),
    }));
}
