/**
 * The stored batch: the messages of one partition from one transaction, back to back, Iggy-style
 * (a batch with a base offset and a count); the message log frames each one as a record
 * (_log_record.ts), so per-record work is paid once per commit and partition, not per message.
 *
 * A message record, little endian: `u32 payloadBytes | u32 headerBytes | f64 timestampMicros |
 * headers (see ../header_blob.ts) | payload`. The group commit encodes records straight into the
 * buffer that is written to the log as it is.
 *
 * @module
 */
import type { EncodedMessages, OutgoingMessage, StoredMessage } from "../port.ts";
import { decodeHeaders, headersMaxBytes, writeHeaders } from "../header_blob.ts";

/** Bytes of a record's fixed part. */
export const RECORD_HEADER_BYTES = 16;

const EMPTY_HEADERS: ReadonlyMap<string, string> = new Map();

/**
 * Encodes messages into one growing buffer for one transaction. {@link BatchEncoder.take} hands
 * the buffer over (the log writes it, and in forward mode its tail cache copies it), so a new
 * one starts the next batch.
 */
export class BatchEncoder {
  #buf = new Uint8Array(0);
  #view = new DataView(this.#buf.buffer);
  #pos = 0;

  /** Bytes written so far. */
  get position(): number {
    return this.#pos;
  }

  /** Starts a batch with room for about `bytes`. */
  begin(bytes: number): void {
    this.#buf = new Uint8Array(Math.max(256, bytes));
    this.#view = new DataView(this.#buf.buffer);
    this.#pos = 0;
  }

  /** Leaves `bytes` unwritten at the current position (filled in later by the caller). */
  reserve(bytes: number): void {
    const end = this.#pos + bytes;
    if (end > this.#buf.length) this.#grow(end);
    this.#pos = end;
  }

  /** Appends one record; returns its retention size (payload + encoded header bytes). */
  add(message: OutgoingMessage, timestampMicros: number): number {
    const payload = message.payload;
    const at = this.#pos;
    const headersAt = at + RECORD_HEADER_BYTES;
    let headersEnd = headersAt > this.#buf.length
      ? -1
      : writeHeaders(this.#buf, headersAt, message.headers);
    if (headersEnd < 0) {
      // Rare: the buffer starts with a per-message guess and keeps its growth.
      this.#grow(headersAt + headersMaxBytes(message.headers) + payload.length);
      headersEnd = writeHeaders(this.#buf, headersAt, message.headers);
    }
    const end = headersEnd + payload.length;
    if (end > this.#buf.length) this.#grow(end, headersEnd);
    const headerBytes = headersEnd - headersAt;
    const view = this.#view;
    view.setUint32(at, payload.length, true);
    view.setUint32(at + 4, headerBytes, true);
    view.setFloat64(at + 8, timestampMicros, true);
    this.#buf.set(payload, headersEnd);
    this.#pos = end;
    return payload.length + headerBytes;
  }

  /** The buffer written so far (it belongs to the caller from now on). */
  take(): ArrayBuffer {
    const buffer = this.#buf.buffer;
    this.#buf = new Uint8Array(0);
    this.#view = new DataView(this.#buf.buffer);
    return buffer;
  }

  /** Grows to at least `bytes`, keeping the first `keep` (what is written so far). */
  #grow(bytes: number, keep = this.#pos): void {
    const bigger = new Uint8Array(Math.max(bytes, this.#buf.length * 2));
    bigger.set(this.#buf.subarray(0, keep));
    this.#buf = bigger;
    this.#view = new DataView(bigger.buffer);
  }
}

/**
 * Decodes the messages of one stored batch with offset ≥ `fromOffset` into `out`, at most until
 * `out` holds `limit` messages. Payloads are views of `data` (no copy). Throws RangeError on a
 * blob that does not hold `count` whole records.
 */
export function decodeBatch(
  data: Uint8Array,
  partition: number,
  baseOffset: number,
  count: number,
  fromOffset: number,
  limit: number,
  out: StoredMessage[],
): void {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  let pos = 0;
  for (let i = 0; i < count && out.length < limit; i++) {
    if (pos + RECORD_HEADER_BYTES > data.length) throw new RangeError("Corrupt batch: truncated");
    const payloadBytes = view.getUint32(pos, true);
    const headerBytes = view.getUint32(pos + 4, true);
    const start = pos + RECORD_HEADER_BYTES;
    const end = start + headerBytes + payloadBytes;
    if (end > data.length) throw new RangeError("Corrupt batch: truncated record");
    const offset = baseOffset + i;
    if (offset >= fromOffset) {
      out.push({
        partition,
        offset,
        timestampMicros: view.getFloat64(pos + 8, true),
        payload: data.subarray(start + headerBytes, end),
        headers: headerBytes === 0
          ? new Map(EMPTY_HEADERS)
          : decodeHeaders(data, start, start + headerBytes),
      });
    }
    pos = end;
  }
}

/** Encoded messages (`readEncoded`) decoded, stamp included; payloads are views of their bytes. */
export function decodeEncoded(run: EncodedMessages): OutgoingMessage[] {
  const { pieces, spans, stamp } = run;
  const out: OutgoingMessage[] = [];
  for (let i = 0; i < run.count; i++) {
    const bytes = pieces[spans[4 * i]];
    const headersAt = spans[4 * i + 1];
    const payloadAt = spans[4 * i + 2];
    const headers = decodeHeaders(bytes, headersAt, payloadAt);
    if (stamp) {
      for (const [k, v] of stamp.headers) headers.set(k, v);
      headers.set(stamp.offsetHeader, `${stamp.offsetPrefix}${run.firstOffset + i}`);
    }
    out.push({ payload: bytes.subarray(payloadAt, spans[4 * i + 3]), headers });
  }
  return out;
}
