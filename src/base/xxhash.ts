/**
 * XXH3-64 and XXH32 (seed 0), the one copy for the process, over our own small WebAssembly
 * module (`tools/xxh3-wasm`, embedded in `_xxh3_wasm.ts`). XXH3-64 seals Iggy message frames
 * and batches (IGGY.md §4.6); XXH32 is Iggy's messages-key partition function (IGGY.md §5,
 * `mapping/partition.ts`) and the embedded log's record checksum.
 *
 * Why our own module instead of a hashing library: an Iggy batch is sealed in one call
 * ({@link sealBatchXxh3}) — every frame's XXH3-64 and the batch's over them — where a general
 * library costs a round trip, a copy and an allocated digest per frame. Profiled through Iggy
 * under QoS 1, those per-frame round trips were ~11% of the gateway's CPU.
 *
 * @module
 */

import { XXH3_WASM_BASE64 } from "./_xxh3_wasm.ts";

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
const utf8 = new TextEncoder();

function decodeBase64(s: string): Uint8Array<ArrayBuffer> {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** Loads the module once (synchronously; it is 12 KB). Kept async for its callers. */
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
 * XXH32, seed 0, as an unsigned 32-bit number. A string is hashed as its UTF-8 bytes,
 * encoded straight into the module's memory (a partition key costs no encoded copy).
 */
export function xxh32(data: Uint8Array | string): number {
  if (typeof data === "string") {
    const ptr = scratch(data.length * 3);
    const { written } = utf8.encodeInto(data, heap.subarray(ptr, ptr + data.length * 3));
    return wasm!.hash32(ptr, written) >>> 0;
  }
  const ptr = scratch(data.length);
  heap.set(data, ptr);
  return wasm!.hash32(ptr, data.length) >>> 0;
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
 * Seals an Iggy batch in place (IGGY.md §4.6): `batch` is the 256-byte batch header then
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
