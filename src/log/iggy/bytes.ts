/**
 * Little-endian byte writer and bounds-checked reader used by every encoder and decoder of
 * the Iggy wire. u64 values travel as bigint on the wire and as number at the port
 * (offsets stay below 2^53).
 *
 * @module
 */

import { utf8 } from "../../base/utf8.ts";

/** Thrown when a reply is shorter than its layout says or otherwise malformed. */
export class DecodeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DecodeError";
  }
}

/** Growable little-endian writer. */
export class ByteWriter {
  #buf: Uint8Array;
  #view: DataView;
  #len = 0;

  constructor(capacity = 64) {
    this.#buf = new Uint8Array(capacity);
    this.#view = new DataView(this.#buf.buffer);
  }

  /** Bytes written so far. */
  get length(): number {
    return this.#len;
  }

  #reserve(n: number): number {
    const at = this.#len;
    if (at + n > this.#buf.length) {
      const next = new Uint8Array(Math.max(this.#buf.length * 2, at + n));
      next.set(this.#buf.subarray(0, at));
      this.#buf = next;
      this.#view = new DataView(next.buffer);
    }
    this.#len += n;
    return at;
  }

  u8(v: number): this {
    const at = this.#reserve(1);
    this.#view.setUint8(at, v);
    return this;
  }
  u32(v: number): this {
    const at = this.#reserve(4);
    this.#view.setUint32(at, v, true);
    return this;
  }
  u64(v: bigint | number): this {
    const at = this.#reserve(8);
    this.#view.setBigUint64(at, BigInt(v), true);
    return this;
  }
  bytes(b: Uint8Array): this {
    const at = this.#reserve(b.length);
    this.#buf.set(b, at);
    return this;
  }
  /** Overwrites a u32 already written at `at`. */
  patchU32(at: number, v: number): this {
    this.#view.setUint32(at, v, true);
    return this;
  }
  /** A copy-free view of what was written (valid until the next write). */
  finish(): Uint8Array {
    return this.#buf.subarray(0, this.#len);
  }
}

/** Bounds-checked little-endian reader over one byte array. */
export class ByteReader {
  readonly #buf: Uint8Array;
  readonly #view: DataView;
  #pos: number;

  constructor(buf: Uint8Array, pos = 0) {
    this.#buf = buf;
    this.#view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    this.#pos = pos;
  }

  get position(): number {
    return this.#pos;
  }
  get remaining(): number {
    return this.#buf.length - this.#pos;
  }

  #take(n: number, what: string): number {
    if (n < 0 || this.#pos + n > this.#buf.length) {
      throw new DecodeError(
        `Truncated Iggy reply: need ${n} bytes for ${what} at ${this.#pos}, have ${this.remaining}`,
      );
    }
    const at = this.#pos;
    this.#pos += n;
    return at;
  }

  u8(what = "u8"): number {
    return this.#view.getUint8(this.#take(1, what));
  }
  u32(what = "u32"): number {
    return this.#view.getUint32(this.#take(4, what), true);
  }
  u64(what = "u64"): bigint {
    return this.#view.getBigUint64(this.#take(8, what), true);
  }
  /** u64 as a number; rejects values above 2^53 − 1. */
  u64n(what = "u64"): number {
    const v = this.u64(what);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new DecodeError(`Iggy value ${what}=${v} exceeds 2^53`);
    }
    return Number(v);
  }
  bytes(n: number, what = "bytes"): Uint8Array {
    const at = this.#take(n, what);
    return this.#buf.subarray(at, at + n);
  }
  skip(n: number, what = "skip"): void {
    this.#take(n, what);
  }
}

const fromUtf8 = new TextDecoder();

/** UTF-8 bytes of a string (`base/utf8.ts`). */
export function toUtf8(s: string): Uint8Array<ArrayBuffer> {
  return utf8(s);
}

/** String from UTF-8 bytes (lossy on invalid input). */
export function fromUtf8Bytes(b: Uint8Array): string {
  return fromUtf8.decode(b);
}

/** Hex of bytes, lower case (tests and logs). */
export function toHex(b: Uint8Array): string {
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

/** Bytes from hex (tests and fixtures). */
export function fromHex(hex: string): Uint8Array {
  const clean = hex.replace(/\s+/g, "");
  const out = new Uint8Array(clean.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(clean.slice(i * 2, i * 2 + 2), 16);
  return out;
}
