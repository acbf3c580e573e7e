/**
 * Metadata records of 0.12: the topic header lost its fixed
 * expiry/compression/max-size fields (33 fixed bytes), partition records carry their context
 * and node lists, streams and users gained a derived-options block. The decoded shapes are
 * those of `../v11/records.ts`, so the backend above does not care which dialect it speaks.
 *
 * @module
 */

import type { ByteReader } from "../bytes.ts";
import { type PartitionRecord, readPartition011, recordDecoders } from "../v11/records.ts";

function readNodes(r: ByteReader, what: string): void {
  r.skip(r.u8(`${what} count`), what);
}

/** A partition record: 40 bytes as 0.11, 24 bytes of context, members, in-sync members. */
export function readPartition012(r: ByteReader): PartitionRecord {
  const partition = readPartition011(r);
  r.skip(24, "partition context");
  readNodes(r, "partition members");
  readNodes(r, "partition in-sync members");
  return partition;
}

/** The records of protocol 0.12. */
const RECORDS_012 = recordDecoders({
  topicFixedTail: 16,
  topicFixedTailHolds: "topic size and messages",
  derivedOptions: true,
  readPartition: readPartition012,
});

export const {
  decodeStreams: decodeStreams012,
  decodeStreamDetails: decodeStreamDetails012,
  decodeTopic: decodeTopic012,
  decodeUser: decodeUser012,
} = RECORDS_012;
