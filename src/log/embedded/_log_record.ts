/**
 * The message log's record: one stored batch (_batch.ts) of one partition, framed so that a
 * scan of a segment file can find where the valid log ends after a crash.
 *
 * Layout, little endian, {@link LOG_RECORD_HEADER_BYTES} bytes then the batch:
 * `u32 magic | u32 dataBytes | u32 checksum | u32 epoch | u32 topicId | u32 partition |
 * u32 count | u32 size | f64 baseOffset | f64 timestampMicros`. The checksum is XXH32 of
 * everything after it (the rest of the header and the batch), so a torn write, a zeroed
 * (preallocated) tail or a stray block never reads as a record. The epoch grows by one each
 * time a writer opens the log: after a crash the writer overwrites the torn tail, and a record
 * of the earlier epoch that happens to follow its new records (written before the crash, past
 * the torn one) must not be read as part of the log.
 *
 * @module
 */
import { xxh32 } from "../../base/xxhash.ts";

/** Bytes before a record's batch. */
export const LOG_RECORD_HEADER_BYTES = 48;

/** "IGL1": a record of this layout. Zeroes (a preallocated tail) never match. */
const MAGIC = 0x314c4749;

/** Where each header field starts, from the record's start (the layout above). */
const Offset = {
  MAGIC: 0,
  DATA_BYTES: 4,
  CHECKSUM: 8,
  /** The first byte the checksum covers: it runs from here to the record's end. */
  EPOCH: 12,
  TOPIC_ID: 16,
  PARTITION: 20,
  COUNT: 24,
  SIZE: 28,
  BASE_OFFSET: 32,
  TIMESTAMP_MICROS: 40,
} as const;

/** A record's header as read back. */
export interface LogRecordHeader {
  readonly dataBytes: number;
  readonly epoch: number;
  readonly topicId: number;
  readonly partition: number;
  readonly count: number;
  readonly baseOffset: number;
  /** Append time of the batch's messages, µs. */
  readonly timestampMicros: number;
  /** Retention bytes of the batch (payloads + encoded headers). */
  readonly size: number;
}

/**
 * Fills the header in front of a batch already written at `at + LOG_RECORD_HEADER_BYTES`
 * (`dataBytes` long), checksum last.
 */
export function sealLogRecord(
  buf: Uint8Array,
  at: number,
  header: LogRecordHeader,
): void {
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  view.setUint32(at + Offset.MAGIC, MAGIC, true);
  view.setUint32(at + Offset.DATA_BYTES, header.dataBytes, true);
  view.setUint32(at + Offset.EPOCH, header.epoch, true);
  view.setUint32(at + Offset.TOPIC_ID, header.topicId, true);
  view.setUint32(at + Offset.PARTITION, header.partition, true);
  view.setUint32(at + Offset.COUNT, header.count, true);
  view.setUint32(at + Offset.SIZE, header.size, true);
  view.setFloat64(at + Offset.BASE_OFFSET, header.baseOffset, true);
  view.setFloat64(at + Offset.TIMESTAMP_MICROS, header.timestampMicros, true);
  const end = at + LOG_RECORD_HEADER_BYTES + header.dataBytes;
  view.setUint32(at + Offset.CHECKSUM, xxh32(buf.subarray(at + Offset.EPOCH, end)), true);
}

/** What a run of a transaction gives its record header (the rest is the transaction's). */
export type RunHeader = Omit<LogRecordHeader, "epoch" | "baseOffset" | "timestampMicros"> & {
  /** Where the run's record starts in the transaction's buffer. */
  readonly at: number;
};

/** Seals the record of each run of one transaction in `buf`: run `r` at base offset `bases[r]`. */
export function sealRuns(
  buf: Uint8Array,
  runs: readonly RunHeader[],
  bases: readonly number[],
  epoch: number,
  timestampMicros: number,
): void {
  for (let r = 0; r < runs.length; r++) {
    const { at, dataBytes, topicId, partition, count, size } = runs[r];
    const baseOffset = bases[r];
    sealLogRecord(buf, at, {
      dataBytes,
      epoch,
      topicId,
      partition,
      count,
      size,
      baseOffset,
      timestampMicros,
    });
  }
}

/**
 * Bytes a record starting at `at` occupies, judged from its header alone: 0 when there is no
 * record there (zeroes, another magic, or a length running past `limit`).
 */
export function logRecordBytes(view: DataView, at: number, limit: number): number {
  if (at + LOG_RECORD_HEADER_BYTES > limit) return 0;
  if (view.getUint32(at + Offset.MAGIC, true) !== MAGIC) return 0;
  const total = LOG_RECORD_HEADER_BYTES + view.getUint32(at + Offset.DATA_BYTES, true);
  return at + total <= limit ? total : 0;
}

/** True when the record at `at` (of `bytes`, from {@link logRecordBytes}) checks out. */
export function logRecordIntact(buf: Uint8Array, view: DataView, at: number, bytes: number) {
  const sum = xxh32(buf.subarray(at + Offset.EPOCH, at + bytes));
  return view.getUint32(at + Offset.CHECKSUM, true) === sum;
}

/** Reads the header of the record at `at` (call after {@link logRecordBytes}). */
export function readLogRecordHeader(view: DataView, at: number): LogRecordHeader {
  return {
    dataBytes: view.getUint32(at + Offset.DATA_BYTES, true),
    epoch: view.getUint32(at + Offset.EPOCH, true),
    topicId: view.getUint32(at + Offset.TOPIC_ID, true),
    partition: view.getUint32(at + Offset.PARTITION, true),
    count: view.getUint32(at + Offset.COUNT, true),
    size: view.getUint32(at + Offset.SIZE, true),
    baseOffset: view.getFloat64(at + Offset.BASE_OFFSET, true),
    timestampMicros: view.getFloat64(at + Offset.TIMESTAMP_MICROS, true),
  };
}
