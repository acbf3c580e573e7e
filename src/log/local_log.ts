/**
 * What the log on this machine (the embedded log) offers beyond the port (`port.ts`): logins
 * against the configured users, messages still in their stored encoding with their byte
 * counts (what the forwarder reads), and its own retention passes.
 *
 * @module
 */
import type { UserConfig } from "../config/types.ts";
import type { EncodedMessages, LogBackend, PartitionAddress } from "./port.ts";

/**
 * A partition's offsets and the bytes of its records (payloads and encoded headers), as the
 * log knows them without reading: what a forwarder measures its backlog by.
 */
export interface PartitionBytes {
  /** First retained offset. */
  readonly start: number;
  /** The offset the next appended message will get. */
  readonly next: number;
  /** Bytes of the retained messages, offsets `[start, next)`. */
  readonly retainedBytes: number;
  /** Bytes of every message noted since the log was opened (retained at open, then appended). */
  readonly appendedBytes: number;
}

/** What one retention pass deleted of one topic, and who had not read all of it. */
export interface RetentionDeleted {
  readonly stream: string;
  readonly topic: string;
  readonly messages: number;
  /** Retention bytes (payload and headers) of the deleted messages. */
  readonly bytes: number;
  /** Consumers whose stored offset lay before the last deleted message. */
  readonly unreadBy: readonly string[];
}

/** Told after each retention pass that deleted messages, once per pass. */
export type RetentionObserver = (deleted: readonly RetentionDeleted[]) => void;

/**
 * The log on this machine (the embedded log, `kind` "embedded"): beyond the port, it checks
 * logins against the configured users, keeps messages in the header-blob encoding (the
 * forwarder reads them so), counts their bytes, and runs its own retention.
 */
export interface LocalLog extends LogBackend {
  readonly kind: "embedded";
  /** A reload's `[[users]]`: the next login checks against them. */
  setUsers(users: readonly UserConfig[]): void;
  /** {@link LogBackend.nextOffset} with the partition's start and bytes. */
  partitionBytes(address: PartitionAddress): Promise<PartitionBytes>;
  /**
   * Up to `count` messages from `fromOffset` on, still encoded, stopping before the payloads
   * pass `maxBytes` (the first message always comes); null when nothing is there.
   */
  pollEncoded(
    address: PartitionAddress,
    fromOffset: number,
    count: number,
    maxBytes: number,
  ): Promise<EncodedMessages | null>;
  /** Has `observe` called after each retention pass that deleted messages. */
  watchRetention(observe: RetentionObserver): void;
  /**
   * Drops a partition's batches that end by `before`, whatever their age (a batch holding
   * `before` stays), for a topic whose older records a newer snapshot supersedes; resolves with
   * how many messages went. Only this log needs it: its segments are shared by every partition,
   * so a few old records of one topic would keep whole segments of the others on disk.
   */
  truncate(address: PartitionAddress, before: number): Promise<number>;
  /**
   * Has `observe` called whenever appended messages become readable (written, before their
   * fsync), once per partition of a group commit, until the function returned is called.
   */
  watchGrowth(observe: GrowthObserver): () => void;
}

/** Told that a partition's messages are readable: where, and the offset after them. */
export type GrowthObserver = (address: PartitionAddress, next: number) => void;

/** Whether `log` is the log on this machine (Iggy deletes by its own retention, unseen). */
export function isLocalLog(log: LogBackend): log is LocalLog {
  return log.kind === "embedded";
}
