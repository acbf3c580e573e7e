/**
 * What the forwarder counts, for `/metrics` and the status page.
 *
 * @module
 */
import type { PartitionAddress } from "../log/port.ts";

/** Counts since start, and where a gap is reported. */
export interface ForwardCounters {
  /** Messages confirmed upstream. */
  sent: number;
  /** Payload bytes of the messages confirmed upstream. */
  sentBytes: number;
  /** Messages sent again after a failed send (what the resolve did not find upstream). */
  resent: number;
  /** Messages found upstream by a resolve after a failure or a restart (not sent again). */
  foundUpstream: number;
  /** Unforwarded messages dropped locally before they could be forwarded. */
  dropped: number;
  /** Failed sends and reads upstream. */
  failures: number;
  /**
   * Upstream messages a resolve read that name this gateway and partition but an offset the
   * local partition never reached (a corrupted or forged header): ignored, not taken as landed.
   */
  strayOrigins: number;
  /** Reports local offsets `[from, to)` of a partition that went before they were forwarded. */
  gap(address: PartitionAddress, from: number, to: number): void;
  /** Reports `count` stray origins of one resolve, the highest claiming local offset `offset`. */
  stray(address: PartitionAddress, count: number, offset: number, localEnd: number): void;
}

/** Mean payload bytes of the messages sent so far (0 before the first): what sizes the lag. */
export function meanSentBytes(c: ForwardCounters): number {
  return c.sent > 0 ? c.sentBytes / c.sent : 0;
}
