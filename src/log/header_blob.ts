/**
 * The header blob: compact binary encoding of message headers, stored in each message record
 * of the embedded log's batches (`embedded/_batch.ts`), and read as it is by the Iggy encoder
 * when stored messages are forwarded (`iggy/blob_to_tlv.ts`, which knows the key codes).
 *
 * Layout: for each entry in insertion order, `varint(keyBytes) key varint(valueBytes) value`,
 * lengths as unsigned LEB128, strings as UTF-8. No count prefix: the blob length ends it.
 * A key of the envelope (`mqtt.topic`, …) is written as the two bytes `0 code` instead (a
 * spelled-out key is never empty, so a zero length marks a code; `0 0` is the empty key): the
 * envelope's keys were ~45 of every message's ~70 header bytes, written with every message.
 * Headers with spelled-out keys read the same.
 * Binary rather than JSON because it is written on the append hot path: encoding goes straight
 * into the batch buffer (no allocation per message), and the byte length needed for retention
 * accounting falls out for free.
 *
 * @module
 */

import { shortAscii } from "../base/utf8.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });
const EMPTY = new Uint8Array(0);

/** Keys stored as a one-byte code (index + 1); never reorder, only append. */
export const KEY_CODES = [
  "mqtt.topic",
  "mqtt.qos",
  "mqtt.client_id",
  "mqtt.packet_id",
  "mqtt.retain",
  "mqtt.empty",
] as const;
const CODE_OF = new Map<string, number>(KEY_CODES.map((k, i) => [k, i + 1]));

/**
 * An upper bound on the bytes {@link writeHeaders} needs for `headers`: 3 UTF-8 bytes per
 * UTF-16 unit and a 5-byte varint per string.
 */
export function headersMaxBytes(headers: ReadonlyMap<string, string>): number {
  let n = 0;
  for (const [key, value] of headers) n += entryMaxBytes(key, value);
  return n;
}

/** Worst case of one entry: 3 UTF-8 bytes per UTF-16 unit plus a 5-byte varint per string. */
function entryMaxBytes(key: string, value: string): number {
  return 10 + (key.length + value.length) * 3;
}

/**
 * Writes `headers` into `buf` at `pos`; returns the position after them, or -1 when `buf`
 * may be too short (the caller grows it by {@link headersMaxBytes} and writes again). The
 * batch encoder writes straight into the buffer it hands to the writer: no intermediate copy
 * or view per message, and no sizing pass while the buffer has room.
 */
export function writeHeaders(
  buf: Uint8Array,
  pos: number,
  headers: ReadonlyMap<string, string>,
): number {
  for (const [key, value] of headers) {
    if (pos + entryMaxBytes(key, value) > buf.length) return -1;
    const code = key.length === 0 ? 0 : CODE_OF.get(key);
    if (code === undefined) pos = writeString(buf, key, pos);
    else {
      buf[pos++] = 0;
      buf[pos++] = code;
    }
    pos = writeString(buf, value, pos);
  }
  return pos;
}

/** Writes `varint(len) utf8` at `pos`; returns the position after it. */
function writeString(buf: Uint8Array, s: string, pos: number): number {
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

/** Encodes headers into a fresh array (for tests and cold paths). */
export function encodeHeaders(headers: ReadonlyMap<string, string>): Uint8Array {
  if (headers.size === 0) return EMPTY;
  const buf = new Uint8Array(headersMaxBytes(headers));
  return buf.slice(0, writeHeaders(buf, 0, headers));
}

/**
 * Decodes what {@link encodeHeaders} wrote, `bytes[start, end)` (the whole array by default);
 * throws on a truncated or non-UTF-8 blob. Every polled message goes through here: the
 * readers below return their strings and leave their position in {@link cursor} rather
 * than allocate a pair per string.
 */
export function decodeHeaders(
  bytes: Uint8Array,
  start = 0,
  end = bytes.length,
): Map<string, string> {
  const out = new Map<string, string>();
  cursor = start;
  while (cursor < end) {
    const key = readKey(bytes, end);
    out.set(key, readString(bytes, end));
  }
  return out;
}

/** Where the last {@link readKey} or {@link readString} stopped. */
let cursor = 0;

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

/** A key at {@link cursor}: spelled out, or `0 code` for one of {@link KEY_CODES} (`0 0`: ""). */
function readKey(bytes: Uint8Array, end: number): string {
  const pos = cursor;
  if (bytes[pos] !== 0) return readString(bytes, end);
  if (pos + 1 >= end) throw new RangeError("Corrupt header blob: truncated key code");
  const code = bytes[pos + 1];
  cursor = pos + 2;
  if (code === 0) return "";
  const key = KEY_CODES[code - 1];
  if (key === undefined) throw new RangeError(`Corrupt header blob: unknown key code ${code}`);
  return key;
}

/** A length-prefixed string at {@link cursor}, ending at or before `end`. */
function readString(bytes: Uint8Array, end: number): string {
  const len = readLength(bytes, cursor, end);
  const pos = lengthEnd;
  const stop = pos + len;
  if (len < 0 || stop > end) throw new RangeError("Corrupt header blob: truncated");
  cursor = stop;
  return shortAscii(bytes, pos, stop) ?? decoder.decode(bytes.subarray(pos, stop));
}

/** Where the last {@link readLength} stopped: the string's first byte. */
export let lengthEnd = 0;

/** The varint length at `pos` (before `end`); leaves where it ends in {@link lengthEnd}. */
export function readLength(bytes: Uint8Array, pos: number, end: number): number {
  let len = 0;
  let shift = 0;
  for (;;) {
    if (pos >= end || shift > 28) throw new RangeError("Corrupt header blob: bad length");
    const b = bytes[pos++];
    len |= (b & 0x7f) << shift;
    if (b < 0x80) break;
    shift += 7;
  }
  lengthEnd = pos;
  return len;
}

function varintSize(n: number): number {
  let size = 1;
  while (n >= 0x80) {
    n >>>= 7;
    size++;
  }
  return size;
}
