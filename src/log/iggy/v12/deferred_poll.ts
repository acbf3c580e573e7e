/**
 * Polls on 0.12: the deferred poll (106) that waits in Iggy until
 * messages arrive, and the reply whose head grew to 40 bytes (the partition context that
 * served the read). Batches decode as in 0.11; a producer section (bytes 52..72) is accepted.
 *
 * @module
 */

import { checkPolledOffsets, decodeBatches, type PollReply } from "../batch.ts";
import { ByteReader, ByteWriter } from "../bytes.ts";
import type { RouteContext } from "./routed_header.ts";

/** Bounds of a deferred poll (the codec's validation rules). */
export const DEFERRED = Object.freeze({
  MAX_WAIT_MS: 600_000,
  /** The request timeout must exceed the wait by at least this much. */
  TIMEOUT_MARGIN_MS: 1_000,
  MIN_MAX_BYTES: 344,
});

/** How long a deferred poll waits and how much it may return. */
export interface DeferredOptions {
  readonly waitMs: number;
  readonly minCount: number;
  readonly maxBytes: number;
}

/** Deferred poll body: the poll body + `wait_us`, `min_count`, `max_bytes`, `timeout_us`. */
export function deferredPollBody(poll: Uint8Array, o: DeferredOptions): Uint8Array {
  const waitMs = Math.min(Math.max(0, Math.floor(o.waitMs)), DEFERRED.MAX_WAIT_MS);
  const w = new ByteWriter(poll.length + 24);
  w.bytes(poll);
  w.u64(waitMs * 1000);
  w.u32(Math.max(1, o.minCount));
  w.u32(Math.max(DEFERRED.MIN_MAX_BYTES, o.maxBytes));
  w.u64((waitMs + DEFERRED.TIMEOUT_MARGIN_MS) * 1000);
  return w.finish();
}

/** A 0.12 poll reply: the 0.11 fields and the context that served the read. */
export interface PollReply012 extends PollReply {
  readonly context: RouteContext;
}

/** Decodes `[partition:u32][current_offset:u64][count:u32][context:3×u64]` then batches. */
export function decodePollReply012(body: Uint8Array): PollReply012 {
  const none = { incarnation: 0n, ownerGeneration: 0n, metadataOp: 0n };
  if (body.length === 0) return { partitionId: 0, currentOffset: 0, messages: [], context: none };
  const r = new ByteReader(body);
  const partitionId = r.u32("partition_id");
  const currentOffset = r.u64n("current_offset");
  r.u32("messages_count");
  const context = {
    incarnation: r.u64("context incarnation"),
    ownerGeneration: r.u64("context owner_generation"),
    metadataOp: r.u64("context metadata_op"),
  };
  return checkPolledOffsets({ partitionId, currentOffset, messages: decodeBatches(r), context });
}
