/**
 * Compaction of the stored-session record topic, on a log that can drop a partition's older
 * messages (`LocalLog.truncate`: the embedded log). Every stored session's record is written
 * again at the head of the topic as it is now, then everything before the first restated record
 * is dropped: superseded records and tombstones go, and with them the hold they had on the
 * embedded log's shared segment files (a segment is deleted only once no partition has records
 * in it). So a record is kept exactly as long as a live session needs it, whatever expiry the
 * settings had when it was written, and a session that expired leaves no record once the
 * compaction after its tombstone has run.
 *
 * When: once the records superseded since the last compaction outnumber max(1,000, the live
 * sessions) (a restart then reads about twice the live set at most), and once the oldest
 * record is older than the compaction age (the caller's: an hour, or half the data's retention
 * by age when shorter; or a quarter of the topic's own retention by age when that is shorter
 * still: a record the topic was created to drop by age is restated first).
 *
 * Order: the ids are taken, and the first batch built and appended, in one turn of the event
 * loop; a session created after it is recorded after that batch, and a later batch restates
 * its sessions as they are when it is built (after any change already recorded). Records are
 * appended in call order, so nothing live lies before the first restated record. The drop waits
 * for the removed sessions' positions to be deleted (`session_expiry.ts`): a tombstone whose
 * deletions were not done stays, and the next start deletes them again.
 *
 * @module
 */
import type { LogBackend, OutgoingMessage, PartitionAddress } from "../log/port.ts";
import { isLocalLog } from "../log/local_log.ts";
import type { Logger } from "../observe/logger.ts";

/** The longest a record waits before it is written again at the head (ms). */
export const COMPACT_MAX_AGE_MS = 3_600_000;
/** Superseded records tolerated whatever the live set (a small set is not rewritten per change). */
const COMPACT_MIN_SUPERSEDED = 1_000;
/** Records restated per append. */
const RESTATE_BATCH = 500;
/** Retention by age of a compacted record topic: none (compaction drops what is superseded). */
const NEVER_MICROS = Number.MAX_SAFE_INTEGER;

/**
 * Creates the record topic when missing: on a log that compacts it, with no retention by age;
 * elsewhere keeping twice `maxExpiryS`. Resolves with the topic's own retention by age in ms (0:
 * none, or not known), which bounds how long compaction may wait: a topic created under other
 * settings keeps its retention, and its live records are restated before it drops them.
 */
export async function openRecordTopic(
  backend: LogBackend,
  address: PartitionAddress,
  maxExpiryS: number,
): Promise<number> {
  const { stream, topic } = address;
  const info = await backend.getTopic(stream, topic) ?? await backend.createTopic(stream, topic, {
    partitions: 1,
    messageExpiryMicros: isLocalLog(backend) ? NEVER_MICROS : 2 * maxExpiryS * 1_000_000,
    durable: true,
  });
  const retention = info.messageExpiryMicros ?? 0;
  return retention > 0 && retention < NEVER_MICROS ? retention / 1000 : 0;
}

/** What a compaction restates. */
export interface CompactionSource {
  /** Resolves when the records asked so far are stored (they then precede the restated ones). */
  written(): Promise<void>;
  /** Client ids of the sessions stored now. */
  ids(): string[];
  /** The record of `clientId`'s session as it is now; null when it is no longer stored. */
  restated(clientId: string): OutgoingMessage | null;
  /** Resolves when the removals recorded so far have had their positions deleted. */
  removalsSettled(): Promise<void>;
}

/** Compacts one record topic; a log without `truncate` is never compacted. */
export class RecordCompactor {
  readonly #backend: LogBackend;
  readonly #address: PartitionAddress;
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #maxAgeMs: number;
  /** Records in the topic now (read at load, appended since). */
  #records = 0;
  /** Wall-clock ms of the oldest record kept (the last compaction's, or the first read). */
  #oldestMs = 0;
  #running: Promise<void> | null = null;
  #stopped = false;
  /** Compactions done since start. */
  compactions = 0;

  constructor(
    backend: LogBackend,
    address: PartitionAddress,
    logger: Logger,
    now: () => number,
    maxAgeMs: number = COMPACT_MAX_AGE_MS,
  ) {
    this.#backend = backend;
    this.#address = address;
    this.#logger = logger;
    this.#now = now;
    this.#maxAgeMs = maxAgeMs;
  }

  /** Whether the log can drop the older records at all. */
  get able(): boolean {
    return isLocalLog(this.#backend);
  }

  /** A record was read (load) or appended; `timestampMs` of a read one. */
  counted(timestampMs?: number): void {
    if (this.#records === 0) this.#oldestMs = timestampMs ?? this.#now();
    this.#records++;
  }

  /** Whether a compaction is due with `live` sessions stored; `retentionMs` the topic's own. */
  due(live: number, retentionMs = 0): boolean {
    if (!this.able || this.#stopped || this.#records === 0) return false;
    const age = retentionMs > 0 ? Math.min(this.#maxAgeMs, retentionMs / 4) : this.#maxAgeMs;
    return this.#records - live > Math.max(COMPACT_MIN_SUPERSEDED, live) ||
      this.#now() - this.#oldestMs >= age;
  }

  /** Compacts now unless one is under way (then that one is waited for). */
  compact(source: CompactionSource): Promise<void> {
    this.#running ??= this.#compact(source).catch((err) => {
      this.#logger.limited("warn", "Compacting the stored-session records failed", { error: err });
    }).finally(() => {
      this.#running = null;
    });
    return this.#running;
  }

  /** No compaction starts, and one under way drops nothing, from now on. */
  stop(): void {
    this.#stopped = true;
  }

  /** Resolves when no compaction is under way. */
  async idle(): Promise<void> {
    while (this.#running !== null) await this.#running;
  }

  async #compact(source: CompactionSource): Promise<void> {
    // Records asked before are committed first, in stored batches of their own: a batch that
    // held them and the first restated record would stay (whole batches are dropped).
    await source.written();
    const ids = source.ids();
    const started = this.#now();
    const appends: Promise<{ baseOffset: number | null }>[] = [];
    let restated = 0;
    for (let i = 0; i < ids.length || appends.length === 0; i += RESTATE_BATCH) {
      const messages: OutgoingMessage[] = [];
      for (const id of ids.slice(i, i + RESTATE_BATCH)) {
        const m = source.restated(id);
        if (m !== null) messages.push(m);
      }
      restated += messages.length;
      if (appends.length === 0) {
        // The cut: the next offset now, read in the same turn as the first batch's append.
        const next = this.#backend.nextOffset(this.#address);
        const first = messages.length > 0
          ? this.#backend.append({ ...this.#address, messages })
          : Promise.resolve({ baseOffset: null });
        appends.push(
          Promise.all([next, first]).then(([n, r]) => ({ baseOffset: r.baseOffset ?? n })),
        );
      } else if (messages.length > 0) {
        appends.push(this.#backend.append({ ...this.#address, messages }));
      }
      if (i + RESTATE_BATCH < ids.length) await appends[appends.length - 1];
    }
    const [first] = await Promise.all(appends);
    this.#records += restated;
    await source.removalsSettled();
    if (this.#stopped || first.baseOffset === null) return;
    if (!isLocalLog(this.#backend)) return;
    const dropped = await this.#backend.truncate(this.#address, first.baseOffset);
    this.#records = this.#records - dropped;
    this.#oldestMs = started;
    this.compactions++;
    this.#logger.info("Stored-session records compacted", { sessions: restated, dropped });
  }
}
