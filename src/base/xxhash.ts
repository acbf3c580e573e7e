/**
 * XXH32 and XXH3-64 (seed 0), the one copy for the process. XXH32 is Iggy's messages-key
 * partition function (IGGY.md §5, `mapping/partition.ts`) and the embedded log's record
 * checksum; XXH3-64 seals Iggy message frames and batches (IGGY.md §4.6).
 *
 * XXH32 is plain TypeScript, synchronous and allocation-free: measured beside hash-wasm's
 * WebAssembly, it is ~30× faster on a partition key (21 vs 700 ns a call) and half as fast on
 * a 64 KiB record (2.2 vs 4.6 GB/s); and the embedded gateway then loads no WebAssembly at all
 * (hash-wasm's module graph and instances were ~13 MB of the RSS at ready). XXH3-64 stays on
 * `hash-wasm`, loaded by {@link loadHashes} only by the Iggy backend (and its tests).
 *
 * @module
 */

import type { IHasher } from "hash-wasm";

const P1 = 0x9e3779b1;
const P2 = 0x85ebca77;
const P3 = 0xc2b2ae3d;
const P4 = 0x27d4eb2f;
const P5 = 0x165667b1;

function rotl(x: number, r: number): number {
  return (x << r) | (x >>> (32 - r));
}

function u32le(b: Uint8Array, i: number): number {
  return b[i] | (b[i + 1] << 8) | (b[i + 2] << 16) | (b[i + 3] << 24);
}

function round(acc: number, lane: number): number {
  return Math.imul(rotl((acc + Math.imul(lane, P2)) | 0, 13), P1);
}

/** XXH32 of `b[0..len)`, seed 0 (the algorithm of the xxHash specification). */
function xxh32Bytes(b: Uint8Array, len: number): number {
  let i = 0;
  let acc: number;
  if (len >= 16) {
    let v1 = (P1 + P2) | 0;
    let v2 = P2 | 0;
    let v3 = 0;
    let v4 = -P1 | 0;
    for (const limit = len - 16; i <= limit; i += 16) {
      v1 = round(v1, u32le(b, i));
      v2 = round(v2, u32le(b, i + 4));
      v3 = round(v3, u32le(b, i + 8));
      v4 = round(v4, u32le(b, i + 12));
    }
    acc = (rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18)) | 0;
  } else acc = P5;
  acc = (acc + len) | 0;
  for (; i + 4 <= len; i += 4) {
    acc = Math.imul(rotl((acc + Math.imul(u32le(b, i), P3)) | 0, 17), P4);
  }
  for (; i < len; i++) acc = Math.imul(rotl((acc + Math.imul(b[i], P5)) | 0, 11), P1);
  acc ^= acc >>> 15;
  acc = Math.imul(acc, P2);
  acc ^= acc >>> 13;
  acc = Math.imul(acc, P3);
  acc ^= acc >>> 16;
  return acc >>> 0;
}

const encoder = new TextEncoder();
/** Scratch for a string's UTF-8 bytes; grows to the longest key seen (keys are ≤ 255 bytes). */
let scratch = new Uint8Array(256);

/**
 * XXH32, seed 0, as an unsigned 32-bit number. A string is hashed as its UTF-8 bytes, encoded
 * into a reused scratch buffer (a partition key costs no encoded copy).
 */
export function xxh32(data: Uint8Array | string): number {
  if (typeof data !== "string") return xxh32Bytes(data, data.length);
  // UTF-8 takes at most 3 bytes per UTF-16 unit.
  if (data.length * 3 > scratch.length) scratch = new Uint8Array(data.length * 3);
  const { written } = encoder.encodeInto(data, scratch);
  return xxh32Bytes(scratch, written);
}

let hasher3: IHasher | undefined;
let loading: Promise<void> | undefined;

/** Loads XXH3-64 (hash-wasm) once; {@link xxh3_64} and {@link xxh3_64Into} need it resolved. */
export function loadHashes(): Promise<void> {
  loading ??= (async () => {
    const { createXXHash3 } = await import("hash-wasm");
    hasher3 = await createXXHash3(0, 0);
  })();
  return loading;
}

function ready(h: IHasher | undefined): IHasher {
  if (!h) throw new Error("XXH3 not loaded: await loadHashes() first");
  return h;
}

// hash-wasm's binary digest is the canonical (big-endian) representation.
function digestBigEndian(h: IHasher): bigint {
  const d = h.digest("binary");
  let v = 0n;
  for (const byte of d) v = (v << 8n) | BigInt(byte);
  return v;
}

/** XXH3-64, seed 0, of the concatenation of `parts`. */
export function xxh3_64(...parts: Uint8Array[]): bigint {
  const h = ready(hasher3);
  h.init();
  for (const p of parts) h.update(p);
  return digestBigEndian(h);
}

/**
 * XXH3-64, seed 0, of `data` (then `more`), written little-endian at `out[at..at+8]`: the
 * frame and batch seals, without a BigInt per hash.
 */
export function xxh3_64Into(
  data: Uint8Array,
  out: Uint8Array,
  at: number,
  more?: Uint8Array,
): void {
  const h = ready(hasher3);
  h.init();
  h.update(data);
  if (more !== undefined) h.update(more);
  const d = h.digest("binary"); // big-endian
  for (let i = 0; i < 8; i++) out[at + i] = d[7 - i];
}
