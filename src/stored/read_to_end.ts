/**
 * Reads a partition from an offset to its end as it is now (no wait at the end: a caller such
 * as a CONNECT waits on it, and Iggy 0.12 would hold a caught-up poll), batch by batch: the
 * record topics of the stored sessions and of the retained messages are read this way.
 *
 * @module
 */
import {
  type LogBackend,
  NO_WAIT,
  type PartitionAddress,
  type StoredMessage,
} from "../log/port.ts";

/**
 * Calls `visit` with every message from `from` to the end, in offset order, `batch` per poll;
 * resolves with the offset after the last one read (`from` when there was none). A `visit`
 * that throws stops the reading (the caller decides whether a bad record may).
 */
export async function readToEnd(
  backend: LogBackend,
  address: PartitionAddress,
  from: number,
  batch: number,
  visit: (m: StoredMessage) => void,
): Promise<number> {
  let next = from;
  for (;;) {
    const got = await backend.poll(address, next, batch, NO_WAIT);
    if (got.length === 0) return next;
    for (const m of got) {
      visit(m);
      next = m.offset + 1;
    }
  }
}
