/**
 * The newest timestamp a log holds, read from the last message of each partition: what the
 * clock ledger (`clock_ledger.ts`) judges a start by when it has no file of its own (the first
 * start after an upgrade from a version without one, or a deleted ledger).
 *
 * @module
 */
import { type LogBackend, NO_WAIT } from "./port.ts";

/**
 * Partitions read at most (one poll of one message each): a store with more is judged by the
 * first this many, as `listTopics` gives them, and says so.
 */
export const NEWEST_STORED_MAX_PARTITIONS = 4_096;

/** What {@link newestStored} found. */
export interface NewestStored {
  /** The newest timestamp of the last messages read (wall ms), or null when none was found. */
  readonly newestMs: number | null;
  /** Partitions read. */
  readonly partitions: number;
  /** Partitions left unread past the bound. */
  readonly unread: number;
}

/**
 * The newest of the partitions' last messages' timestamps. Only the last message of each is
 * read: a partition's timestamps rise with its offsets unless the clock stepped back while it
 * was written, and then the last one is still the clock's latest reading.
 */
export async function newestStored(
  log: LogBackend,
  maxPartitions = NEWEST_STORED_MAX_PARTITIONS,
): Promise<NewestStored> {
  let newestMicros: number | null = null;
  let partitions = 0;
  let unread = 0;
  for (const t of await log.listTopics()) {
    for (let partition = 0; partition < t.partitions; partition++) {
      if (partitions >= maxPartitions) {
        unread++;
        continue;
      }
      partitions++;
      const address = { stream: t.stream, topic: t.topic, partition };
      const next = await log.nextOffset(address);
      if (next <= 0) continue;
      const [last] = await log.poll(address, next - 1, 1, NO_WAIT);
      if (last && (newestMicros === null || last.timestampMicros > newestMicros)) {
        newestMicros = last.timestampMicros;
      }
    }
  }
  const newestMs = newestMicros === null ? null : Math.floor(newestMicros / 1000);
  return { newestMs, partitions, unread };
}
