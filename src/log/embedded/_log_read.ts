/**
 * Reads of one partition of the message log (_message_log.ts): decoded into messages (polls),
 * or still encoded (the forwarder's copy upstream, `EncodedMessages`). Offsets below the
 * partition's start are skipped; so are records a crash left only partly written.
 *
 * @module
 */
import type { EncodedMessages, StoredMessage } from "../port.ts";
import { decodeBatch, RECORD_HEADER_BYTES } from "./_batch.ts";
import type { MessageLog } from "./_message_log.ts";

/** Up to `limit` messages of a partition from `fromOffset` on, in offset order. */
export function readMessages(
  log: MessageLog,
  topicId: number,
  partition: number,
  fromOffset: number,
  limit: number,
): StoredMessage[] {
  const out: StoredMessage[] = [];
  if (!(limit > 0)) return out;
  limit = Math.floor(limit);
  // Only the wanted records are copied out of the shared chunk buffer.
  log.readBatches(topicId, partition, fromOffset, (data, baseOffset, count, from) => {
    decodeBatch(data.slice(), partition, baseOffset, count, from, limit, out);
    return out.length < limit;
  });
  return out;
}

/**
 * Up to `limit` messages from `fromOffset` on, still encoded, stopping before their payloads
 * pass `maxBytes` (the first always comes); null when there is none.
 */
export function readEncoded(
  log: MessageLog,
  topicId: number,
  partition: number,
  fromOffset: number,
  limit: number,
  maxBytes: number,
): EncodedMessages | null {
  if (!(limit > 0)) return null;
  const run = new EncodedRun(Math.floor(limit), maxBytes);
  log.readBatches(topicId, partition, fromOffset, (data, base, n, from) => {
    return run.add(data, base, n, from);
  });
  return run.result();
}

/**
 * An encoded read being gathered: each stored batch's wanted records are one piece, a copy
 * (the batch is a view of a shared buffer: a file chunk or the tail cache's ring, which later
 * writes reuse while the piece is still on its way upstream); the spans skip the records'
 * fixed parts.
 */
class EncodedRun {
  readonly #limit: number;
  readonly #maxBytes: number;
  /** Grown as messages come (a live read holds a few, a backlog read `limit`). */
  #spans = new Uint32Array(0);
  readonly #pieces: Uint8Array[] = [];
  #count = 0;
  #payloadBytes = 0;
  #storedBytes = 0;
  #firstOffset = -1;
  #firstTimestampMicros = 0;

  constructor(limit: number, maxBytes: number) {
    this.#limit = limit;
    this.#maxBytes = maxBytes;
  }

  /** Takes what is wanted of one stored batch; false once full. */
  add(data: Uint8Array, baseOffset: number, n: number, from: number): boolean {
    const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
    const piece = this.#pieces.length;
    if (4 * (this.#count + n) > this.#spans.length) this.#growSpans(this.#count + n);
    const spans = this.#spans;
    let pos = 0;
    let copyFrom = -1;
    let copyTo = 0;
    let stopped = false;
    for (let i = 0; i < n; i++) {
      if (pos + RECORD_HEADER_BYTES > data.length) throw new RangeError("Corrupt batch: truncated");
      const payload = view.getUint32(pos, true);
      const headers = view.getUint32(pos + 4, true);
      const end = pos + RECORD_HEADER_BYTES + headers + payload;
      if (end > data.length) throw new RangeError("Corrupt batch: truncated record");
      if (baseOffset + i >= from) {
        if (this.#full(payload)) {
          stopped = true;
          break;
        }
        if (copyFrom < 0) copyFrom = pos;
        if (this.#count === 0) {
          this.#firstOffset = baseOffset + i;
          this.#firstTimestampMicros = view.getFloat64(pos + 8, true);
        }
        const at = pos + RECORD_HEADER_BYTES - copyFrom; // within the piece
        const k = 4 * this.#count++;
        spans[k] = piece;
        spans[k + 1] = at;
        spans[k + 2] = at + headers;
        spans[k + 3] = at + headers + payload;
        this.#payloadBytes += payload;
        this.#storedBytes += headers + payload;
        copyTo = end;
      }
      pos = end;
    }
    if (copyFrom >= 0) {
      this.#pieces.push(data.slice(copyFrom, copyTo));
    }
    return !stopped && this.#count < this.#limit;
  }

  /** Whether a next message of `payload` bytes would pass a bound. */
  #full(payload: number): boolean {
    if (this.#count === this.#limit) return true;
    return this.#count > 0 && this.#payloadBytes + payload > this.#maxBytes;
  }

  /** Room for the spans of `messages` (at most `limit`). */
  #growSpans(messages: number): void {
    const size = 4 * Math.min(this.#limit, Math.max(messages, this.#spans.length / 2, 64));
    const bigger = new Uint32Array(size);
    bigger.set(this.#spans.subarray(0, 4 * this.#count));
    this.#spans = bigger;
  }

  result(): EncodedMessages | null {
    if (this.#count === 0) return null;
    return {
      pieces: this.#pieces,
      spans: this.#spans,
      count: this.#count,
      firstOffset: this.#firstOffset,
      firstTimestampMicros: this.#firstTimestampMicros,
      payloadBytes: this.#payloadBytes,
      storedBytes: this.#storedBytes,
    };
  }
}
