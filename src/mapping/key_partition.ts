/**
 * P5: key → partition, with the function Iggy itself uses for messages-key partitioning, so
 * other Iggy producers agree: `XXH32(utf8(key), seed 0) mod partitions`, 0-based.
 *
 * @module
 */

import { xxh32 } from "../base/xxhash.ts";

/**
 * The 0-based partition for `key` among `partitions` (P5): `XXH32(utf8(key), 0) % partitions`,
 * matching Iggy's server and SDKs.
 *
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
