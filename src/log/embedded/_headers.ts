/**
 * Compact binary encoding of message headers for the `headers` BLOB column.
 *
 * Layout: for each entry in insertion order, `varint(keyBytes) key varint(valueBytes) value`,
 * lengths as unsigned LEB128, strings as UTF-8. No count prefix: the blob length ends it.
 * Binary rather than JSON because it is written on the append hot path: encoding goes into one
 * reused buffer (no allocation per message but a view), and the byte length needed for
 * retention accounting falls out for free.
 *
 * @module
 */

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });
const EMPTY = new Uint8Array(0);

/**
 * Encodes header maps into one reused, growing buffer and hands out views of it. Views stay
 * valid until {@link HeaderEncoder.reset}: several rows can be bound to one multi-row INSERT
 * (node:sqlite copies bound blobs, so the buffer may be reused right after the statement runs).
 * When the buffer grows, earlier views keep pointing at the old one, which is never written again.
 */
export class HeaderEncoder {
  #buf = new Uint8Array(16 * 1024);
  #pos = 0;

  /** Allows the buffer to be overwritten: call only once earlier views have been bound. */
  reset(): void {
    this.#pos = 0;
  }

  /** Encodes `headers` after the previous ones; the view is valid until reset(). */
  encode(headers: ReadonlyMap<string, string>): Uint8Array {
    if (headers.size === 0) return EMPTY;
    const start = this.#pos;
    let pos = start;
    for (const [key, value] of headers) {
      pos = this.#writeString(key, pos);
      pos = this.#writeString(value, pos);
    }
    this.#pos = pos;
    return this.#buf.subarray(start, pos);
  }

  /** Writes `varint(len) utf8` at `pos`; returns the position after it. */
  #writeString(s: string, pos: number): number {
    // Worst case: 3 UTF-8 bytes per UTF-16 unit, plus a 5-byte varint.
    this.#ensure(pos + 5 + s.length * 3);
    const buf = this.#buf;
    // Optimistically assume a 1-byte length (< 128 bytes, the common case) and encode in
    // place; move the bytes right only when the length needs more varint bytes.
    const written = writeAscii(buf, s, pos + 1) ??
      encoder.encodeInto(s, buf.subarray(pos + 1)).written;
    const lenBytes = varintSize(written);
    if (lenBytes > 1) buf.copyWithin(pos + lenBytes, pos + 1, pos + 1 + written);
    let n = written;
    let p = pos;
    while (n >= 0x80) {
      buf[p++] = (n & 0x7f) | 0x80;
      n >>>= 7;
    }
    buf[p++] = n;
    return p + written;
  }

  /** Grows the buffer (rare: it keeps its largest size), keeping what is written. */
  #ensure(bytes: number): void {
    if (bytes <= this.#buf.length) return;
    const bigger = new Uint8Array(Math.max(bytes, this.#buf.length * 2));
    bigger.set(this.#buf);
    this.#buf = bigger;
  }
}

/** Encodes headers into a fresh array (for tests and cold paths). */
export function encodeHeaders(headers: ReadonlyMap<string, string>): Uint8Array {
  return new HeaderEncoder().encode(headers).slice();
}

/** Decodes what {@link encodeHeaders} wrote; throws on a truncated or non-UTF-8 blob. */
export function decodeHeaders(bytes: Uint8Array): Map<string, string> {
  const out = new Map<string, string>();
  let pos = 0;
  while (pos < bytes.length) {
    const [key, afterKey] = readString(bytes, pos);
    const [value, afterValue] = readString(bytes, afterKey);
    out.set(key, value);
    pos = afterValue;
  }
  return out;
}

/**
 * Copies a short ASCII string byte by byte; null when it is not ASCII or long. Header keys and
 * most values are short ASCII, and a JS loop beats the TextEncoder call for them.
 */
function writeAscii(buf: Uint8Array, s: string, at: number): number | null {
  const n = s.length;
  if (n > 64) return null;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80) return null;
    buf[at + i] = c;
  }
  return n;
}

function readString(bytes: Uint8Array, pos: number): [string, number] {
  let len = 0;
  let shift = 0;
  for (;;) {
    if (pos >= bytes.length || shift > 28) throw new RangeError("Corrupt header blob: bad length");
    const b = bytes[pos++];
    len |= (b & 0x7f) << shift;
    if (b < 0x80) break;
    shift += 7;
  }
  const end = pos + len;
  if (len < 0 || end > bytes.length) throw new RangeError("Corrupt header blob: truncated");
  return [decoder.decode(bytes.subarray(pos, end)), end];
}

function varintSize(n: number): number {
  let size = 1;
  while (n >= 0x80) {
    n >>>= 7;
    size++;
  }
  return size;
}
