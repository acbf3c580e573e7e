/**
 * User headers from the header blob (`../header_blob.ts`, how the embedded log stores them)
 * straight into Iggy's TLV, byte to byte: forwarding stored messages then makes no string and
 * no map per message. Each entry becomes `[STRING][u32 key length][key][STRING][u32 value
 * length][value]`, as `send_encoder.ts` writes them from a map; a coded key (`0 code`) is
 * copied from its TLV start, made once. A copy's stamp (`CopyStamp`: the forwarder's origin
 * headers) is written after each message's own headers from bytes made once per stamp.
 *
 * @module
 */
import { KEY_CODES, lengthEnd, readLength } from "../header_blob.ts";
import type { CopyStamp } from "../port.ts";
import { EncodeError, encodeUserHeaders, tlvKeyStart, ValueKind } from "./encoding.ts";

/** Each coded key's TLV start `[STRING][u32 length][key][STRING]`, by code (index + 1). */
const CODED_KEYS: readonly Uint8Array[] = [
  new Uint8Array(0),
  ...KEY_CODES.map((k) => tlvKeyStart(new TextEncoder().encode(k))),
];

/** The key's TLV start for a code, or an error for what Iggy cannot take. */
function codedKey(code: number): Uint8Array {
  const key = CODED_KEYS[code];
  if (code === 0 || key === undefined) {
    throw new EncodeError(code === 0 ? "Header key is empty" : `Unknown header key code ${code}`);
  }
  return key;
}

function checkLength(n: number, what: string, pos: number, end: number): void {
  if (n < 1 || n > 255) throw new EncodeError(`Header ${what} must be 1..255 bytes, got ${n}`);
  if (pos + n > end) throw new EncodeError("Corrupt header blob: truncated");
}

/**
 * The TLV bytes of the blob `blob[start, end)`; throws EncodeError on a key or value Iggy
 * refuses (empty, or over 255 bytes, or past the blob's end), RangeError on a bad length.
 */
export function tlvBytesOf(blob: Uint8Array, start: number, end: number): number {
  let n = 0;
  let pos = start;
  while (pos < end) {
    if (blob[pos] === 0) {
      if (pos + 1 >= end) throw new EncodeError("Corrupt header blob: truncated key code");
      n += codedKey(blob[pos + 1]).length - 1;
      pos += 2;
    } else {
      const k = readLength(blob, pos, end);
      checkLength(k, "key", lengthEnd, end);
      n += 1 + 4 + k;
      pos = lengthEnd + k;
    }
    const v = readLength(blob, pos, end);
    checkLength(v, "value", lengthEnd, end);
    n += 1 + 4 + v;
    pos = lengthEnd + v;
  }
  return n;
}

/**
 * Writes the blob's headers as TLV at `at` of `out` (room for {@link tlvBytesOf} is the
 * caller's); returns the end. The blob must have passed {@link tlvBytesOf}.
 */
export function writeTlvOf(
  out: Uint8Array,
  at: number,
  blob: Uint8Array,
  start: number,
  end: number,
): number {
  let pos = start;
  while (pos < end) {
    if (blob[pos] === 0) {
      const key = CODED_KEYS[blob[pos + 1]];
      out.set(key, at);
      at += key.length;
      pos += 2;
    } else {
      const k = readLength(blob, pos, end);
      pos = lengthEnd;
      out[at] = ValueKind.STRING;
      at = writeLength(out, at + 1, k);
      at = copy(out, at, blob, pos, k);
      out[at++] = ValueKind.STRING;
      pos += k;
    }
    const v = readLength(blob, pos, end);
    pos = lengthEnd;
    at = writeLength(out, at, v);
    at = copy(out, at, blob, pos, v);
    pos += v;
  }
  return at;
}

/** A u32 LE length under 256 at `at`; returns the position after it. */
function writeLength(out: Uint8Array, at: number, n: number): number {
  out[at] = n;
  out[at + 1] = 0;
  out[at + 2] = 0;
  out[at + 3] = 0;
  return at + 4;
}

/** Copies `n` bytes: a loop for short runs (most header values), `set` for long ones. */
function copy(out: Uint8Array, at: number, from: Uint8Array, pos: number, n: number): number {
  if (n <= 32) { for (let i = 0; i < n; i++) out[at + i] = from[pos + i]; }
  else out.set(from.subarray(pos, pos + n), at);
  return at + n;
}

/** A {@link CopyStamp} as TLV bytes: what every message gains, and its offset header's start. */
export interface StampTlv {
  readonly constant: Uint8Array;
  /** `[STRING][u32 length][key][STRING]`: the offset header up to its value's length. */
  readonly offsetKey: Uint8Array;
  /** The offset value's start, before the digits. */
  readonly prefix: Uint8Array;
}

/** Digits of the largest safe integer: an offset's longest decimal form. */
const MAX_OFFSET_DIGITS = 16;

const stamps = new WeakMap<CopyStamp, StampTlv>();

/** The stamp's TLV bytes, made once per stamp; throws EncodeError on what Iggy refuses. */
export function stampTlv(stamp: CopyStamp): StampTlv {
  let tlv = stamps.get(stamp);
  if (tlv === undefined) {
    const utf8 = new TextEncoder();
    for (const [k, v] of stamp.headers) {
      checkLength(utf8.encode(k).length, "key", 0, Infinity);
      checkLength(utf8.encode(v).length, "value", 0, Infinity);
    }
    const key = utf8.encode(stamp.offsetHeader);
    const prefix = utf8.encode(stamp.offsetPrefix);
    checkLength(key.length, "key", 0, Infinity);
    checkLength(prefix.length + MAX_OFFSET_DIGITS, "value", 0, Infinity);
    tlv = { constant: encodeUserHeaders(stamp.headers), offsetKey: tlvKeyStart(key), prefix };
    stamps.set(stamp, tlv);
  }
  return tlv;
}

/** The stamp's TLV bytes for the message at `offset`. */
export function stampBytesOf(tlv: StampTlv, offset: number): number {
  return tlv.constant.length + tlv.offsetKey.length + 4 + tlv.prefix.length + digitsOf(offset);
}

/**
 * The decimal digits of consecutive offsets, counted up in place like an odometer: a run's
 * messages are numbered without a division per digit per message.
 */
export class OffsetDigits {
  readonly #digits = new Uint8Array(MAX_OFFSET_DIGITS + 1);
  /** Where the number starts in `#digits` (it ends at the array's end). */
  #start = MAX_OFFSET_DIGITS + 1;

  constructor(first: number) {
    const text = String(first);
    this.#start = this.#digits.length - text.length;
    for (let i = 0; i < text.length; i++) this.#digits[this.#start + i] = text.charCodeAt(i);
  }

  get length(): number {
    return this.#digits.length - this.#start;
  }

  /** Copies the current number to `at`; returns the end. */
  writeTo(out: Uint8Array, at: number): number {
    return copy(out, at, this.#digits, this.#start, this.length);
  }

  /** The next offset. */
  increment(): void {
    const d = this.#digits;
    let i = d.length - 1;
    while (i >= this.#start && d[i] === 57) d[i--] = 48;
    if (i >= this.#start) d[i]++;
    else d[--this.#start] = 49; // 99 → 100
  }
}

/** Writes the stamp for the message whose offset `digits` holds at `at`; returns the end. */
export function writeStampTlv(
  out: Uint8Array,
  at: number,
  tlv: StampTlv,
  digits: OffsetDigits,
): number {
  out.set(tlv.constant, at);
  at += tlv.constant.length;
  out.set(tlv.offsetKey, at);
  at += tlv.offsetKey.length;
  at = writeLength(out, at, tlv.prefix.length + digits.length);
  at = copy(out, at, tlv.prefix, 0, tlv.prefix.length);
  return digits.writeTo(out, at);
}

/** Decimal digits of a safe non-negative integer. */
function digitsOf(n: number): number {
  let digits = 1;
  while (n >= 10) {
    n = Math.floor(n / 10);
    digits++;
  }
  return digits;
}
