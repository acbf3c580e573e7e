/**
 * The SEND_MESSAGES body written straight from the gateway's messages (payload + header map)
 * into one buffer: `[metadata_len][stream][topic][partitioning][count][batch]`, the batch as
 * `batch.ts` documents it (256-byte header, 48-byte frames, XXH3-64 seals).
 *
 * Why not `encodeSendMessages` over `BatchMessage`s: `TextEncoder.encode` of header strings, a
 * crypto call per message id, growing buffers and three copies of each batch (headers, batch,
 * body, frame) took a large share of the gateway's CPU through Iggy. Here the buffer is sized once (an upper bound, trimmed at
 * the end), header keys and repeated values (client ids, topics) are encoded once and cached,
 * short ASCII values are written by a loop, message ids come from one random block per batch,
 * and HEADER_SIZE bytes are left in front so the connection writes its frame header in place.
 *
 * @module
 */
import {
  isRun,
  runWireBytes,
  type SendItem,
  writeFrameHeader,
  writeRunFrames,
} from "./stored_frames.ts";
import { BATCH_HEADER_SIZE, FRAME_HEADER_SIZE } from "./batch.ts";
import { EncodeError, IdentifierKind, PartitioningKind, tlvKeyStart } from "./encoding.ts";
import { HEADER_SIZE } from "./header_layout.ts";
import { sealBatchXxh3 } from "../../base/xxhash.ts";

export { runWireBytes, type SendItem };

/** Most strings kept encoded; the cache is cleared when full (bounded memory). */
export const MAX_CACHED_STRINGS = 4096;
/** Longest string worth caching (header values beyond this are written each time). */
const MAX_CACHED_LENGTH = 255;
/** Values up to this many UTF-16 units are written by a loop, without a cache lookup. */
const SHORT_VALUE = 16;

/** Spare batch buffers kept for the next batches (see {@link SendEncoder.release}). */
export const MAX_SPARE_BUFFERS = 4;
/** A buffer larger than this is not kept: a rare huge batch does not stay in memory. */
export const MAX_SPARE_BYTES = 2 * 1024 * 1024;
/** Buffers are made in steps of this size, so one made for a batch fits the next ones. */
const BUFFER_STEP = 64 * 1024;

/** Fills `out` with 16 random bytes per call: the base of a batch's message ids. */
export type IdSource = (out: Uint8Array) => void;

const NO_BYTES = new Uint8Array(0);
const cryptoIds: IdSource = (out) => crypto.getRandomValues(out);
const utf8 = new TextEncoder();

/** Encodes SEND_MESSAGES bodies; one per backend (it owns the string cache). */
export class SendEncoder {
  #cache = new Map<string, Uint8Array>();
  #keys = new Map<string, Uint8Array>();
  #ids: IdSource;
  #idBase = new Uint8Array(16);
  /** The header loop's buffer and position (see `#writeHeaders`). */
  #out: Uint8Array = NO_BYTES;
  #at = 0;
  /** Buffers of confirmed batches, ready for the next (at most MAX_SPARE_BUFFERS). */
  #spares: ArrayBuffer[] = [];
  /** Buffers handed out in a frame and not released: only those are taken back. */
  #lent = new WeakSet<ArrayBuffer>();

  constructor(ids: IdSource = cryptoIds) {
    this.#ids = ids;
  }

  /** Strings held encoded (at most {@link MAX_CACHED_STRINGS}). */
  get cachedStrings(): number {
    return this.#cache.size;
  }

  /** Header keys held as encoded TLV starts (at most {@link MAX_CACHED_STRINGS}). */
  get cachedKeys(): number {
    return this.#keys.size;
  }

  /** Spare buffers held (at most {@link MAX_SPARE_BUFFERS}). */
  get spareBuffers(): number {
    return this.#spares.length;
  }

  /**
   * Takes back the buffer of a frame from {@link encode} for a later batch. Call it only when
   * nothing will read the frame again: the send was confirmed, so Iggy has read all of it and
   * no retry will resend it. A frame of a failed send is left to the garbage collector (a
   * write may still hold it). Why: a fresh buffer per batch has its pages zeroed every time,
   * and its external memory makes the collector run more often.
   */
  release(frame: Uint8Array): void {
    const buffer = frame.buffer as ArrayBuffer;
    if (!this.#lent.delete(buffer)) return; // not ours, or released already
    if (this.#spares.length < MAX_SPARE_BUFFERS && buffer.byteLength <= MAX_SPARE_BYTES) {
      this.#spares.push(buffer);
    }
  }

  /**
   * A buffer of at least `size` bytes: a spare, or a new one. A spare is not zeroed:
   * `encode` writes every byte it sends (the fields a fresh buffer had at 0 included).
   */
  #buffer(size: number): Uint8Array {
    const spares = this.#spares;
    for (let i = spares.length - 1; i >= 0; i--) {
      if (spares[i].byteLength >= size) {
        const buffer = spares[i];
        spares[i] = spares[spares.length - 1];
        spares.pop();
        this.#lent.add(buffer);
        return new Uint8Array(buffer);
      }
    }
    const out = new Uint8Array(Math.ceil(size / BUFFER_STEP) * BUFFER_STEP);
    this.#lent.add(out.buffer);
    return out;
  }

  /**
   * The frame for `messages` to one partition: a buffer whose first HEADER_SIZE bytes are
   * left for the request header, then the body. `nowMicros` is every message's origin time;
   * `framesBound`, when the caller has it, bounds the frames' bytes (48 + payload + headers
   * with 3 bytes per UTF-16 unit of keys and values, 10 per header), saving a pass; `count`
   * is how many messages the items hold (more than their number when runs are among them).
   */
  encode(
    stream: string,
    topic: string,
    partition: number,
    messages: readonly SendItem[],
    nowMicros: number,
    framesBound?: number,
    count = messages.length,
  ): Uint8Array {
    if (count === 0) throw new RangeError("A batch must hold at least one message");
    const s = this.#name(stream, "Identifier");
    const t = this.#name(topic, "Identifier");
    const head = HEADER_SIZE + 4 + 2 + s.length + 2 + t.length + 6 + 4;
    const out = this.#buffer(head + BATCH_HEADER_SIZE + (framesBound ?? boundOf(messages)));
    // The request header's room (written in place, over zeros), the metadata and the batch
    // header (bytes 52..256 must be zero): a spare buffer still holds an older batch there.
    out.fill(0, 0, head + BATCH_HEADER_SIZE);
    const dv = new DataView(out.buffer);
    writeMetadata(out, dv, s, t, partition, count);
    const end = this.#writeFrames(out, dv, head + BATCH_HEADER_SIZE, messages);
    sealBatch(out, dv, head, end, count, nowMicros);
    return out.subarray(0, end);
  }

  /** Every message's frame from `at`, unsealed (see `sealBatch`); returns the end. */
  #writeFrames(
    out: Uint8Array,
    dv: DataView,
    at: number,
    messages: readonly SendItem[],
  ): number {
    this.#ids(this.#idBase);
    // The last message's header map and where its encoded headers are: a message with the
    // same map (shared by the envelope for a client's QoS 0 run) gets those bytes copied.
    let lastHeaders: ReadonlyMap<string, string> | null = null;
    let lastStart = 0;
    let lastEnd = 0;
    let index = 0;
    for (let i = 0; i < messages.length; i++) {
      const item = messages[i];
      if (isRun(item)) {
        at = writeRunFrames(out, dv, at, item, index, this.#idBase);
        index += item.count;
        continue;
      }
      const m = item;
      if (m.payload.length === 0) throw new RangeError("a message payload is empty");
      const frame = at;
      writeFrameHeader(out, dv, frame, index++, m.payload.length, this.#idBase);
      out.set(m.payload, frame + FRAME_HEADER_SIZE);
      const headersStart = frame + FRAME_HEADER_SIZE + m.payload.length;
      if (m.headers === lastHeaders) {
        out.copyWithin(headersStart, lastStart, lastEnd);
        at = headersStart + (lastEnd - lastStart);
      } else {
        at = this.#writeHeaders(out, headersStart, m.headers);
        lastHeaders = m.headers;
        lastStart = headersStart;
        lastEnd = at;
      }
      dv.setUint32(frame + 32, at - headersStart, true);
    }
    return at;
  }

  /** A name's bytes (1..255), cached. */
  #name(name: string, what: string): Uint8Array {
    const b = this.#encoded(name);
    if (b.length < 1 || b.length > 255) {
      throw new EncodeError(`${what} "${name}" must be 1..255 UTF-8 bytes, got ${b.length}`);
    }
    return b;
  }

  #encoded(s: string): Uint8Array {
    let b = this.#cache.get(s);
    if (b === undefined) {
      b = utf8.encode(s);
      if (this.#cache.size >= MAX_CACHED_STRINGS) this.#cache.clear();
      this.#cache.set(s, b);
    }
    return b;
  }

  /**
   * A header key's TLV start, cached: `[STRING][u32 key length][key][STRING]`, the value's
   * kind byte included, so a key costs one copy per message.
   */
  #keyPrefix(k: string): Uint8Array {
    let b = this.#keys.get(k);
    if (b === undefined) {
      b = tlvKeyStart(this.#name(k, "Header key"));
      if (this.#keys.size >= MAX_CACHED_STRINGS) this.#keys.clear();
      this.#keys.set(k, b);
    }
    return b;
  }

  /**
   * User headers as TLV (string keys, string values) from `at`; returns the end. Through
   * `Map.forEach` with one callback made once and the position in fields: a `for…of` over
   * the map allocates an entry array per header, and this loop runs for every message.
   */
  #writeHeaders(out: Uint8Array, at: number, headers: ReadonlyMap<string, string>): number {
    this.#out = out;
    this.#at = at;
    headers.forEach(this.#writeHeader);
    this.#out = NO_BYTES;
    return this.#at;
  }

  readonly #writeHeader = (v: string, k: string): void => {
    const out = this.#out;
    const prefix = this.#keyPrefix(k);
    out.set(prefix, this.#at);
    const lengthAt = this.#at + prefix.length;
    const start = lengthAt + 4;
    // Short values (QoS, packet ids) are ASCII written directly; longer ones that repeat
    // (client ids, topics) come from the cache.
    let n = v.length <= SHORT_VALUE ? writeAscii(out, start, v) : -1;
    if (n < 0) n = this.#writeValue(out, start, v);
    if (n < 1 || n > 255) {
      throw new EncodeError(`Header "${k}" value must be 1..255 bytes, got ${n}`);
    }
    out[lengthAt] = n; // u32 LE, n < 256
    out[lengthAt + 1] = 0;
    out[lengthAt + 2] = 0;
    out[lengthAt + 3] = 0;
    this.#at = start + n;
  };

  /** A value at `start` from the cache, as ASCII (cached when long) or as UTF-8; its length. */
  #writeValue(out: Uint8Array, start: number, v: string): number {
    const cached = v.length <= MAX_CACHED_LENGTH ? this.#cache.get(v) : undefined;
    if (cached !== undefined) {
      out.set(cached, start);
      return cached.length;
    }
    const n = writeAscii(out, start, v);
    if (n < 0) return utf8.encodeInto(v, out.subarray(start)).written;
    // Long ASCII: likely a topic, worth caching.
    if (n > SHORT_VALUE && n <= MAX_CACHED_LENGTH) this.#encoded(v);
    return n;
  }
}

/** Writes `s` as ASCII at `at`; returns its length, or -1 (nothing usable) if not ASCII. */
function writeAscii(out: Uint8Array, at: number, s: string): number {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80) return -1;
    out[at + i] = c;
  }
  return s.length;
}

/** Upper bound of the frames' bytes (see `encode`'s `framesBound`). */
function boundOf(messages: readonly SendItem[]): number {
  let bound = 0;
  for (const m of messages) bound += wireSizeOf(m);
  return bound;
}

/** `[metadata_len][stream][topic][partitioning][count]` after the request header's room. */
function writeMetadata(
  out: Uint8Array,
  dv: DataView,
  stream: Uint8Array,
  topic: Uint8Array,
  partition: number,
  count: number,
): void {
  let at = HEADER_SIZE;
  dv.setUint32(at, 2 + stream.length + 2 + topic.length + 6 + 4, true);
  at = writeIdentifier(out, at + 4, stream);
  at = writeIdentifier(out, at, topic);
  out[at] = PartitioningKind.PARTITION_ID;
  out[at + 1] = 4;
  dv.setUint32(at + 2, partition, true);
  dv.setUint32(at + 6, count, true);
}

/**
 * The batch header at `start` for frames up to `end` (origin time, length, count), then the
 * seals: each frame's checksum and the batch's over its header and the frame sums, all in
 * one WebAssembly call (`base/xxhash.ts`).
 */
function sealBatch(
  out: Uint8Array,
  dv: DataView,
  start: number,
  end: number,
  count: number,
  nowMicros: number,
): void {
  setU64(dv, start + 24, nowMicros); // origin_timestamp
  setU64(dv, start + 32, end - start);
  dv.setUint32(start + 48, count, true);
  sealBatchXxh3(out.subarray(start, end), count);
}

function writeIdentifier(out: Uint8Array, at: number, name: Uint8Array): number {
  out[at] = IdentifierKind.STRING;
  out[at + 1] = name.length;
  out.set(name, at + 2);
  return at + 2 + name.length;
}

/** A u64 from a safe integer, little-endian, without BigInt. */
function setU64(dv: DataView, at: number, n: number): void {
  dv.setUint32(at, n % 0x1_0000_0000, true);
  dv.setUint32(at + 4, Math.floor(n / 0x1_0000_0000), true);
}

/**
 * An upper bound of a message's frame size (UTF-8 is at most 3 bytes per UTF-16 unit): the
 * batch bounds, and the encoder's buffer size.
 */
export function wireSizeOf(m: SendItem): number {
  if (isRun(m)) return runWireBytes(m);
  if (m.headers !== boundHeaders) {
    sized = 0;
    m.headers.forEach(addHeaderBound); // no entry array per header (see `#writeHeaders`)
    boundHeaders = m.headers;
    headersBound = sized;
  }
  return FRAME_HEADER_SIZE + m.payload.length + headersBound;
}

/** The last header map sized and its bound: a shared map (see `envelope.ts`) is sized once. */
let boundHeaders: ReadonlyMap<string, string> | null = null;
let headersBound = 0;
let sized = 0;
const addHeaderBound = (v: string, k: string): void => {
  sized += 10 + 3 * (k.length + v.length);
};
