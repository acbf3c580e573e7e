/**
 * Shared encodings of the Iggy wire: Name, Identifier, Consumer, optional
 * partition, Partitioning, polling strategy and the key/value TLV used by user headers and
 * options. Streams and topics are always addressed by name (string identifiers): Iggy
 * reuses numeric ids after a delete.
 *
 * @module
 */

import { ByteReader, ByteWriter, DecodeError, fromUtf8Bytes, toUtf8 } from "./bytes.ts";

/** Thrown when a value cannot be encoded (name too long, empty header key…). */
export class EncodeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "EncodeError";
  }
}

function checkedUtf8(value: string, what: string): Uint8Array {
  const b = toUtf8(value);
  if (b.length < 1 || b.length > 255) {
    throw new EncodeError(`${what} "${value}" must be 1..255 UTF-8 bytes, got ${b.length}`);
  }
  return b;
}

/** Name: `[len:u8 1..255][UTF-8]`. */
export function writeName(w: ByteWriter, name: string, what = "Name"): ByteWriter {
  const b = checkedUtf8(name, what);
  return w.u8(b.length).bytes(b);
}

/** Reads a Name. */
export function readName(r: ByteReader, what = "name"): string {
  const len = r.u8(what);
  return fromUtf8Bytes(r.bytes(len, what));
}

/** Identifier kinds. */
export const IdentifierKind = Object.freeze({ NUMERIC: 1, STRING: 2 });

/** String Identifier: `[2][len:u8][name]`. */
export function writeIdentifier(w: ByteWriter, name: string): ByteWriter {
  const b = checkedUtf8(name, "Identifier");
  return w.u8(IdentifierKind.STRING).u8(b.length).bytes(b);
}

/** Numeric Identifier: `[1][4][u32]` (only for ids the server just gave us, e.g. user ids). */
export function writeNumericIdentifier(w: ByteWriter, id: number): ByteWriter {
  return w.u8(IdentifierKind.NUMERIC).u8(4).u32(id);
}

/** Length in bytes of a string Identifier. */
export function identifierLength(name: string): number {
  return 2 + checkedUtf8(name, "Identifier").length;
}

/** Plain consumer (kind 1) named by a string Identifier. */
export function writeConsumer(w: ByteWriter, name: string): ByteWriter {
  return writeIdentifier(w.u8(1), name);
}

/** Optional partition: `[flag:u8][u32]`, 5 bytes. */
export function writePartition(w: ByteWriter, partition: number | undefined): ByteWriter {
  return partition === undefined ? w.u8(0).u32(0) : w.u8(1).u32(partition);
}

/** Partitioning kinds. */
export const PartitioningKind = Object.freeze({ BALANCED: 1, PARTITION_ID: 2, MESSAGES_KEY: 3 });

/** Partitioning = PartitionId: `[2][4][u32]` (the gateway picks the partition itself). */
export function writePartitionIdPartitioning(w: ByteWriter, partition: number): ByteWriter {
  return w.u8(PartitioningKind.PARTITION_ID).u8(4).u32(partition);
}

/** Length in bytes of a PartitionId partitioning. */
export const PARTITION_ID_PARTITIONING_LENGTH = 6;

/** Polling strategy kinds. */
export const PollingKind = Object.freeze({ OFFSET: 1, TIMESTAMP: 2, FIRST: 3, LAST: 4, NEXT: 5 });

/** Polling strategy: `[kind:u8][value:u64]`. */
export function writePollingStrategy(w: ByteWriter, kind: number, value: number): ByteWriter {
  return w.u8(kind).u64(value);
}

/** Value kinds of the TLV encoding. */
export const ValueKind = Object.freeze({ RAW: 1, STRING: 2, BOOL: 3, UINT32: 11, UINT64: 12 });

/**
 * A string header's TLV up to its value's length, `[STRING][u32 key length][key][STRING]`, for
 * a key of 1..255 bytes: written once and copied per message by the encoders that cache it.
 */
export function tlvKeyStart(key: Uint8Array): Uint8Array {
  const b = new Uint8Array(6 + key.length);
  b[0] = ValueKind.STRING;
  b[1] = key.length; // 1..255: the u32's other bytes stay 0
  b.set(key, 5);
  b[5 + key.length] = ValueKind.STRING;
  return b;
}

/** One TLV entry: `[key_kind:u8][key_len:u32][key][value_kind:u8][value_len:u32][value]`. */
function writeTlv(w: ByteWriter, key: string, kind: number, value: Uint8Array): void {
  const k = checkedUtf8(key, "Header key");
  if (value.length < 1 || value.length > 255) {
    throw new EncodeError(`Header "${key}" value must be 1..255 bytes, got ${value.length}`);
  }
  w.u8(ValueKind.STRING).u32(k.length).bytes(k).u8(kind).u32(value.length).bytes(value);
}

/** User headers as TLV with string keys and string values; empty map → no bytes. */
export function encodeUserHeaders(headers: ReadonlyMap<string, string>): Uint8Array {
  if (headers.size === 0) return new Uint8Array(0);
  const w = new ByteWriter(64);
  for (const [k, v] of headers) writeTlv(w, k, ValueKind.STRING, toUtf8(v));
  return w.finish().slice();
}

/** Options TLV entry with a string key and a u64 value (create-topic options). */
export function writeU64Option(w: ByteWriter, key: string, value: number): ByteWriter {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt(value), true);
  writeTlv(w, key, ValueKind.UINT64, b);
  return w;
}

/** Options TLV entry with a string key and a u32 value. */
export function writeU32Option(w: ByteWriter, key: string, value: number): ByteWriter {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, value, true);
  writeTlv(w, key, ValueKind.UINT32, b);
  return w;
}

/** Options TLV entry with a string key and a bool value. */
export function writeBoolOption(w: ByteWriter, key: string, value: boolean): ByteWriter {
  writeTlv(w, key, ValueKind.BOOL, new Uint8Array([value ? 1 : 0]));
  return w;
}

/** A fixed-size value kind of the TLV encoding: its size, and how a value renders as text. */
interface FixedKind {
  readonly bytes: number;
  /** Null: the bytes as text (the 128-bit kinds). */
  readonly text: ((v: DataView) => string) | null;
}

/** The fixed-size value kinds by kind byte; any other kind (Raw, String) is its bytes as text. */
const FIXED_KINDS: ReadonlyMap<number, FixedKind> = new Map<number, FixedKind>([
  [3, { bytes: 1, text: (v) => (v.getUint8(0) ? "true" : "false") }], // bool
  [4, { bytes: 1, text: (v) => String(v.getInt8(0)) }], // i8
  [5, { bytes: 2, text: (v) => String(v.getInt16(0, true)) }], // i16
  [6, { bytes: 4, text: (v) => String(v.getInt32(0, true)) }], // i32
  [7, { bytes: 8, text: (v) => String(v.getBigInt64(0, true)) }], // i64
  [8, { bytes: 16, text: null }], // i128
  [9, { bytes: 1, text: (v) => String(v.getUint8(0)) }], // u8
  [10, { bytes: 2, text: (v) => String(v.getUint16(0, true)) }], // u16
  [11, { bytes: 4, text: (v) => String(v.getUint32(0, true)) }], // u32
  [12, { bytes: 8, text: (v) => String(v.getBigUint64(0, true)) }], // u64
  [13, { bytes: 16, text: null }], // u128
  [14, { bytes: 4, text: (v) => String(v.getFloat32(0, true)) }], // f32
  [15, { bytes: 8, text: (v) => String(v.getFloat64(0, true)) }], // f64
]);

/** A header value as text; a fixed-size kind must have its size. */
function valueToString(key: string, kind: number, b: Uint8Array): string {
  const fixed = FIXED_KINDS.get(kind);
  if (fixed === undefined) return fromUtf8Bytes(b);
  if (fixed.bytes !== b.length) {
    throw new DecodeError(`Header "${key}" of kind ${kind} has ${b.length} bytes`);
  }
  if (fixed.text === null) return fromUtf8Bytes(b);
  return fixed.text(new DataView(b.buffer, b.byteOffset, b.byteLength));
}

/** Decodes user-header TLV into string keys and values (non-string kinds rendered as text). */
export function decodeUserHeaders(bytes: Uint8Array): Map<string, string> {
  const out = new Map<string, string>();
  const r = new ByteReader(bytes);
  while (r.remaining > 0) {
    r.u8("header key kind");
    const key = fromUtf8Bytes(r.bytes(r.u32("header key length"), "header key"));
    const kind = r.u8("header value kind");
    const value = r.bytes(r.u32("header value length"), "header value");
    out.set(key, valueToString(key, kind, value));
  }
  return out;
}
