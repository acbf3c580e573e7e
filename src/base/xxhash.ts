/**
 * XXH32 and XXH3-64 (seed 0), the one copy for the process. XXH32 is Iggy's messages-key
 * partition function (`mapping/key_partition.ts`) and the embedded log's record
 * checksum; XXH3-64 seals Iggy message frames and batches.
 *
 * XXH32 is plain TypeScript, synchronous and allocation-free: beside hash-wasm's WebAssembly,
 * it is much faster on a partition key (no call into WebAssembly and back) and slower only on
 * long records, and an embedded gateway then instantiates
 * no WebAssembly.
 *
 * XXH3-64 is our own small WebAssembly module (`tools/xxh3-wasm`, embedded in
 * `_xxh3_wasm.ts`), instantiated on first use (Iggy frames are sealed with it; long client ids are hashed into
 * session consumer names). An Iggy
 * batch is sealed in one call ({@link sealBatchXxh3}) — every frame's XXH3-64 and the batch's
 * over them — where a general library costs a round trip, a copy and an allocated digest per
 * frame: a large share of the gateway's CPU through Iggy.
 *
 * @module
 */

import { XXH3_WASM_BASE64 } from "./_xxh3_wasm.ts";

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
let keyScratch = new Uint8Array(256);

/**
 * XXH32, seed 0, as an unsigned 32-bit number. A string is hashed as its UTF-8 bytes, encoded
 * into a reused scratch buffer (a partition key costs no encoded copy).
 */
export function xxh32(data: Uint8Array | string): number {
  if (typeof data !== "string") return xxh32Bytes(data, data.length);
  // UTF-8 takes at most 3 bytes per UTF-16 unit.
  if (data.length * 3 > keyScratch.length) keyScratch = new Uint8Array(data.length * 3);
  const { written } = encoder.encodeInto(data, keyScratch);
  return xxh32Bytes(keyScratch, written);
}

interface Exports {
  memory: WebAssembly.Memory;
  scratch(len: number): number;
  seal_batch(ptr: number, len: number, count: number): number;
  hash64(ptr: number, len: number, out: number): void;
  hash32(ptr: number, len: number): number;
}

let wasm: Exports | undefined;
/** A view of the module's memory (re-made when it grew). */
let heap: Uint8Array = new Uint8Array(0);

function decodeBase64(s: string): Uint8Array<ArrayBuffer> {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** Loads the XXH3 module ahead of first use (synchronously; it is about 12,000 bytes). */
export function loadHashes(): Promise<void> {
  load();
  return Promise.resolve();
}

function load(): Exports {
  if (wasm === undefined) {
    const module = new WebAssembly.Module(decodeBase64(XXH3_WASM_BASE64));
    wasm = new WebAssembly.Instance(module, {}).exports as unknown as Exports;
  }
  return wasm;
}

/** The start of `len` scratch bytes in the module's memory; `heap` is valid after it. */
function scratch(len: number): number {
  const w = load();
  const ptr = w.scratch(len);
  if (ptr === 0) throw new RangeError(`Cannot hash ${len} bytes: out of WebAssembly memory`);
  if (heap.buffer !== w.memory.buffer) heap = new Uint8Array(w.memory.buffer);
  return ptr;
}

/** XXH3-64, seed 0, of the concatenation of `parts`. */
export function xxh3_64(...parts: Uint8Array[]): bigint {
  const out = new Uint8Array(8);
  xxh3_64Into(concat(parts), out, 0);
  return new DataView(out.buffer).getBigUint64(0, true);
}

function concat(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0];
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/**
 * XXH3-64, seed 0, of `data` (then `more`), written little-endian at `out[at..at+8]`,
 * without a BigInt.
 */
export function xxh3_64Into(
  data: Uint8Array,
  out: Uint8Array,
  at: number,
  more?: Uint8Array,
): void {
  const len = data.length + (more?.length ?? 0);
  const ptr = scratch(len + 8);
  heap.set(data, ptr);
  if (more !== undefined) heap.set(more, ptr + data.length);
  wasm!.hash64(ptr, len, ptr + len);
  out.set(heap.subarray(ptr + len, ptr + len + 8), at);
}

/**
 * Seals an Iggy batch in place: `batch` is the 256-byte batch header then
 * `count` frames. Every frame's first 8 bytes become XXH3-64 of the rest of it; the batch
 * checksum (bytes 40..48) becomes XXH3-64 of bytes 0..40 and 48..52 and the frame sums.
 * One copy in, one call, one copy out.
 *
 * @throws {RangeError} if a frame runs past the end of `batch` (nothing is sealed)
 */
export function sealBatchXxh3(batch: Uint8Array, count: number): void {
  const ptr = scratch(batch.length);
  heap.set(batch, ptr);
  const bad = wasm!.seal_batch(ptr, batch.length, count);
  if (bad !== 0) throw new RangeError(`Frame ${bad - 1} of ${count} runs past the batch's end`);
  batch.set(heap.subarray(ptr, ptr + batch.length));
}
