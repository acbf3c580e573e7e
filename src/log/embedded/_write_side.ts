/**
 * The writing side of an open store: the group commit that appends and syncs, and the
 * retention runner (with forward mode's hold, and its passes on demand when the store needs
 * room). Absent in read-only mode.
 *
 * @module
 */
import { wallClock } from "../../base/wall_clock.ts";
import type { BackendError } from "../port.ts";
import type { Catalog } from "./_catalog.ts";
import { GroupCommit } from "./_group_commit.ts";
import type { MessageLog } from "./_message_log.ts";
import { RetentionRunner } from "./_retention_runner.ts";
import { forwardRoom, storedOffset } from "./_forward_room.ts";
import type { WriterLink } from "./_writer_link.ts";
import type { EmbeddedOptions } from "./options.ts";
import type { ReadStatements } from "./_statements.ts";
import { retentionReport } from "./_retention_report.ts";
import type { LogWatchers } from "./_log_watchers.ts";

/** The writing side: absent in read-only mode. */
export interface WriteSide {
  readonly link: WriterLink;
  readonly commits: GroupCommit;
  readonly retention: RetentionRunner;
}

/** What the write side tells its backend, and asks of it. */
export interface WriteSideHooks {
  readonly clock: () => number;
  /** An append failed: the backend's error for it (and its health). */
  appendFailed(e: unknown): BackendError;
  /** A transaction is on disk: the backend is healthy again. */
  durable(): void;
  /**
   * Retention freed room for the next segment: appends fit again, so a store that was full is
   * ready at once, not only after some append succeeds (a load balancer that gates on `/ready`
   * never sends that append).
   */
  roomFreed(): void;
  /** The reading statements (forward mode's hold reads the forwarder's stored offset). */
  reads(): ReadStatements | undefined;
  /** Who is told that the log grew and what a retention pass deleted. */
  readonly watchers: LogWatchers;
  /** One retention pass with the backend's error handling (the timer's, and on demand). */
  runRetention(): Promise<unknown>;
}

/** Builds the write side over an open store's log, catalog and writer link. */
export function openWriteSide(
  link: WriterLink,
  log: MessageLog,
  catalog: Catalog,
  options: EmbeddedOptions,
  hooks: WriteSideHooks,
): WriteSide {
  const commits = new GroupCommit(
    link,
    log,
    options.maxAppendBatch,
    hooks.clock,
    (e) => hooks.appendFailed(e),
    {
      grew: (state, partition, next) => hooks.watchers.grew(state, partition, next),
      // Healthy again only once a transaction is on disk, not merely committed: a disk that
      // fails every fsync must keep /ready at 503.
      durable: () => {
        hooks.durable();
        if (retention.needsRoom) retention.soon();
      },
    },
    options.qos0SyncMs ?? 0,
    options.commitLingerMs ?? 0,
  );
  const { retentionMaxAgeSeconds, retentionMaxTopicBytes, retentionIntervalMs } = options;
  const retention = new RetentionRunner(
    log,
    catalog,
    link,
    {
      maxAgeMicros: retentionMaxAgeSeconds * 1_000_000,
      maxTopicBytes: retentionMaxTopicBytes,
      correctedMicros: ageCorrection(options),
    },
    forwardRoom(options, (consumer, topicId, partition) => {
      const reads = hooks.reads();
      return reads ? storedOffset(reads, consumer, topicId, partition) : null;
    }),
    { maxBytes: options.maxStoreBytes, freed: () => hooks.roomFreed() },
    (tally) => hooks.watchers.retention?.(retentionReport(tally, catalog, hooks.reads())),
  );
  retention.schedule(retentionIntervalMs, hooks.runRetention);
  return { link, commits, retention };
}

/**
 * How retention moves a stored timestamp before aging it: by `ageClock`'s steps, or the process's
 * `wallClock`'s; not at all under a test's own `clock` (another timeline than the process's).
 */
function ageCorrection(options: EmbeddedOptions): (micros: number) => number {
  const clock = options.ageClock ?? (options.clock ? undefined : wallClock);
  return clock ? (micros) => clock.correctedMicros(micros) : (micros) => micros;
}
