/**
 * P5: key → partition, with the function Iggy itself uses for messages-key partitioning, so
 * other Iggy producers agree: `XXH32(utf8(key), seed 0) mod partitions`, 0-based (IGGY.md §5).
 *
 * @module
 */

import { createXXHash32, type IHasher } from "hash-wasm";

// One hasher for the process: loading the wasm is async, hashing after that is synchronous
// and allocation-free for string input (hash-wasm encodes strings as UTF-8 itself).
let hasher: IHasher | null = null;
let loading: Promise<void> | null = null;

/** Loads the XXH32 wasm. Call once at startup; later calls return the same promise. */
export function initPartitioner(): Promise<void> {
  loading ??= createXXHash32(0).then((h) => {
    hasher = h;
  });
  return loading;
}

/** XXH32 (seed 0) of the key's UTF-8 bytes, as an unsigned 32-bit number. */
export function xxh32(key: string): number {
  if (hasher === null) {
    throw new Error("Cannot hash a partition key: call initPartitioner() once at startup first");
  }
  hasher.init();
  hasher.update(key);
  const digest = hasher.digest("binary"); // canonical (big-endian) XXH32 bytes
  return ((digest[0] << 24) | (digest[1] << 16) | (digest[2] << 8) | digest[3]) >>> 0;
}

/**
 * The 0-based partition for `key` among `partitions` (P5): `XXH32(utf8(key), 0) % partitions`,
 * matching Iggy's server and SDKs. Synchronous after {@link initPartitioner}.
 *
 * @throws {Error} if {@link initPartitioner} has not completed
 * @throws {RangeError} if `partitions` is not an integer from 1 to 2^32 - 1
 */
export function partitionForKey(key: string, partitions: number): number {
  if (!Number.isInteger(partitions) || partitions < 1 || partitions > 0xffffffff) {
    throw new RangeError(
      `Cannot choose a partition among ${partitions}: need an integer from 1 to 4294967295`,
    );
  }
  return xxh32(key) % partitions;
}
