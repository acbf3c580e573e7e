/**
 * XXH3-64 and XXH32 (seed 0) over `hash-wasm`: one async initialisation, then synchronous
 * hashing. XXH3-64 seals message frames and batches (IGGY.md §4.6); XXH32 is Iggy's
 * messages-key partition function (IGGY.md §5).
 *
 * @module
 */

import { createXXHash3, createXXHash32, type IHasher } from "hash-wasm";

let hasher3: IHasher | undefined;
let hasher32: IHasher | undefined;
let loading: Promise<void> | undefined;

/** Loads the hashers once; every other function here needs it to have resolved. */
export function loadHashes(): Promise<void> {
  loading ??= (async () => {
    const [a, b] = await Promise.all([createXXHash3(0, 0), createXXHash32(0)]);
    hasher3 = a;
    hasher32 = b;
  })();
  return loading;
}

function ready(h: IHasher | undefined): IHasher {
  if (!h) throw new Error("Hashes not loaded: await loadHashes() first");
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

/** XXH32, seed 0. */
export function xxh32(bytes: Uint8Array): number {
  const h = ready(hasher32);
  h.init();
  h.update(bytes);
  return Number(digestBigEndian(h));
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
