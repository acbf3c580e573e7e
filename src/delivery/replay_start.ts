/**
 * Where a replay starts on one triple: `earliest` is the oldest message
 * retention kept; `time:` the first message appended at or after that time, found by a binary
 * search over offsets with one-message polls (O(log n) polls, any backend); `latest` is live.
 * The search assumes timestamps rise with offsets: after a backward step of the wall clock they
 * go down once, and a time inside the range stamped before the step may start on either side of
 * it (docs/OPERATIONS.md, "Time and the wall clock").
 *
 * @module
 */
import type { LogBackend, PartitionAddress } from "../log/port.ts";
import type { ReplayFrom } from "../session/replay_from.ts";

/** The first offset to replay on `address`, or null to start live. */
export async function replayStartOffset(
  backend: LogBackend,
  address: PartitionAddress,
  from: ReplayFrom,
): Promise<number | null> {
  if (from.kind === "latest") return null;
  const next = await backend.nextOffset(address);
  const first = (await backend.poll(address, 0, 1))[0];
  if (first === undefined) return next; // nothing retained
  if (from.kind === "earliest" || first.timestampMicros >= from.micros) return first.offset;
  // Invariant: the message at `lo` is older than the time; the answer is in (lo, hi].
  let lo = first.offset;
  let hi = next;
  while (hi - lo > 1) {
    const mid = lo + Math.floor((hi - lo) / 2);
    const m = (await backend.poll(address, mid, 1))[0];
    if (m === undefined || m.offset >= hi) hi = mid; // offsets past retention's floor are dense
    else if (m.timestampMicros >= from.micros) hi = m.offset;
    else lo = m.offset;
  }
  return hi;
}
