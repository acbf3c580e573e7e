/**
 * The message log: every stored batch of every partition, appended in commit order to one
 * sequence of preallocated segment files (_log_segment.ts), one fdatasync per group commit.
 * The catalog (topics, consumer offsets, each partition's floors) stays in SQLite; messages
 * do not go through it: as SQLite rows each message was written twice (WAL, then checkpoint),
 * and checkpoints held commits while they copied. Here a commit writes its records once.
 *
 * One log rather than one file per partition: a group commit touches many partitions, and one
 * fsync per partition costs more than the single one.
 *
 * What lives where:
 * - Positions: a record's log position is its segment's base plus its place in the segment.
 * - Per partition, in memory ({@link PartitionLog}): first retained offset (`start`), next
 *   offset, retained bytes, where its retained records begin, where its newest ends, and a
 *   sparse index (offset → position) so a read scans at most a bounded stretch of the log.
 *   All of it is rebuilt by scanning the segments at open ({@link MessageLog.open}).
 * - Per segment: how far it holds valid records, and for each partition with records in it
 *   the end of its last one there; a segment is deleted once every such partition's retained
 *   records begin after it ({@link MessageLog.deleteRetainedOut}).
 * - Floors in SQLite: retention moves a partition's `start` past records that may stay on disk
 *   until their whole segment goes, and deleting the segment that held a partition's newest
 *   record would make its next offset unknowable; so before any segment is deleted the
 *   backend stores each partition's start and next offsets, and the scan at open begins from
 *   them ({@link PartitionFloor}).
 *
 * @module
 */
import { BackendError } from "../port.ts";
import { type PartitionFloor, partitionKey, PartitionLog } from "./_log_index.ts";
import { LOG_RECORD_HEADER_BYTES, sealRuns } from "./_log_record.ts";
import { FileSegment, MemorySegment, type Segment } from "./_log_segment.ts";
import { syncDirectory } from "../durable_file.ts";
import {
  claimSpare,
  nextSegmentBytes,
  retainedOutSegments,
  rollCapacity,
  roomUnderBound,
  roundUp,
  segmentBytesFor,
  segmentsBytes,
  type SegmentState,
  type Spare,
  spareDue,
  transactionRoom,
  usedOfActive,
} from "./_segment_table.ts";
import { scanLog } from "./_log_scan.ts";
import { DiskRoom } from "./_disk_room.ts";
import { type BatchVisitor, TailCache, tailRecords } from "./_tail_cache.ts";
import { reuseEmptyTail, scanNewSegments } from "./_log_recovery.ts";
import { dropOldestRecords, type OldestRecord, oldestRecord } from "./_log_retention.ts";

export { type PartitionFloor, partitionKey, PartitionLog } from "./_log_index.ts";
export { segmentBytesFor } from "./_segment_table.ts";

/** One partition run of a transaction, already encoded at `at + LOG_RECORD_HEADER_BYTES`. */
export interface LogRun {
  readonly topicId: number;
  readonly partition: number;
  readonly count: number;
  /** Retention bytes of the run's messages. */
  readonly size: number;
  /** Where the run's record (header included) starts in the transaction's buffer. */
  readonly at: number;
  /** Bytes of the run's batch (after the header). */
  readonly dataBytes: number;
}

/** How a log is opened. */
export interface MessageLogOptions {
  /** Directory of the segment files; ":memory:" keeps them in memory. */
  readonly dir: string;
  /** Bound on the sum of the segments' sizes; appends fail with "full" beyond it. */
  readonly maxBytes: number;
  /** Size of each new segment; defaults to {@link segmentBytesFor}(maxBytes). */
  readonly segmentBytes?: number;
  /** Scan only: never writes, never creates or deletes files (the `read` CLI). */
  readonly readOnly?: boolean;
  /** Each partition's stored floors (keyed by {@link partitionKey}). */
  readonly floors: ReadonlyMap<string, PartitionFloor>;
  /** Bytes of newest records kept in memory for reads (`_tail_cache.ts`); 0 = none. */
  readonly tailCacheBytes?: number;
  /** Called when the disk, after refusing a segment, has room again (_disk_room.ts). */
  readonly onDiskRoom?: () => void;
}

/** The message log of one store. */
export class MessageLog {
  readonly #dir: string;
  readonly #memory: boolean;
  readonly #readOnly: boolean;
  readonly #maxBytes: number;
  readonly #segmentBytes: number;
  readonly #floors: ReadonlyMap<string, PartitionFloor>;
  readonly #partitions = new Map<number, PartitionLog[]>();
  /** Segments in log order; the last one is the active one. */
  readonly #segments: SegmentState[] = [];
  /** The next segment being zero-filled ahead of need, and its base. */
  #spare: Spare | undefined;
  /** This writer's epoch (one more than any record found at open). */
  #epoch = 1;
  /** Highest epoch scanned so far. */
  #maxEpoch = 0;
  #closed = false;
  readonly #tail: TailCache | undefined = undefined;
  /** The disk holding the segments: its free space, and a refusal of new segments. */
  readonly room: DiskRoom;

  private constructor(options: MessageLogOptions) {
    this.#dir = options.dir;
    this.#memory = options.dir === ":memory:";
    this.#readOnly = options.readOnly ?? false;
    this.#maxBytes = options.maxBytes;
    this.#segmentBytes = options.segmentBytes ?? segmentBytesFor(options.maxBytes);
    this.#floors = options.floors;
    if (options.tailCacheBytes) this.#tail = new TailCache(options.tailCacheBytes);
    this.room = new DiskRoom(this.#dir, options.onDiskRoom);
  }

  /** Opens the log, scanning every segment to rebuild the partitions' state. */
  static async open(options: MessageLogOptions): Promise<MessageLog> {
    const log = new MessageLog(options);
    try {
      await log.#recover();
    } catch (e) {
      await log.close();
      throw e;
    }
    return log;
  }

  /** Bytes the segments take on disk (their preallocated sizes). */
  get bytes(): number {
    return segmentsBytes(this.#segments);
  }
  /** The largest append the log takes now under its bound, the disk aside. */
  get roomUnderBound(): number {
    return roomUnderBound(this.#segments, this.#maxBytes);
  }

  /** Number of segment files. */
  get segmentCount(): number {
    return this.#segments.length;
  }

  /** The partition's state, created (empty, from its floor) on first use. */
  partition(topicId: number, partition: number): PartitionLog {
    let list = this.#partitions.get(topicId);
    if (!list) this.#partitions.set(topicId, list = []);
    return list[partition] ??= new PartitionLog(
      topicId,
      partition,
      this.#floors.get(partitionKey(topicId, partition)),
    );
  }

  /** The highest topic id any record or floor has named (0 when none). */
  maxTopicId(): number {
    let max = 0;
    for (const id of this.#partitions.keys()) max = Math.max(max, id);
    return max;
  }

  /** Every partition that has state, for retention and floors. */
  *partitions(): IterableIterator<PartitionLog> {
    for (const list of this.#partitions.values()) {
      for (const p of list) if (p) yield p;
    }
  }

  /**
   * Writes one transaction: fills in each run's record header (base offset = the partition's
   * next offset) and appends the buffer to the active segment, rolling to a new one when it
   * does not fit. Resolves with each run's base offset once the bytes are written (readable,
   * not yet durable: {@link sync}); the partitions move on only then. Rejects with
   * BackendError("full") when a new segment would pass the bound (the caller cuts within
   * {@link roomFor}).
   */
  append(buffer: Uint8Array, runs: readonly LogRun[], timestampMicros: number): Promise<number[]> {
    try {
      if (this.#readOnly || this.#closed) {
        throw new BackendError("unavailable", "The message log is not open for writing");
      }
      const active = this.#segments.at(-1);
      if (active === undefined || active.written + buffer.length > active.segment.capacity) {
        // A roll: once the next segment is active, the transaction is written as usual.
        return this.#activeFor(buffer.length).then(() =>
          this.append(buffer, runs, timestampMicros)
        );
      }
      // Otherwise all of it is synchronous (the page cache): no async frame, no awaits.
      const parts = runs.map((run) => this.partition(run.topicId, run.partition));
      // Offsets within one transaction: a partition may appear in one run only.
      const bases = parts.map((p) => p.next);
      sealRuns(buffer, runs, bases, this.#epoch, timestampMicros);
      const pos = active.written;
      try {
        active.segment.write(pos, buffer);
      } catch (e) {
        // The failed write may have left whole records past `pos`; the next transaction is
        // written over them, and a newer epoch keeps a scan from reading on into any of them
        // that outlast it.
        this.#epoch++;
        throw this.room.failed(e, buffer.length);
      }
      active.written = pos + buffer.length;
      this.#prepareSpare();
      const logPos = active.segment.base + pos;
      for (let r = 0; r < runs.length; r++) {
        const run = runs[r];
        const p = parts[r];
        const recordBytes = LOG_RECORD_HEADER_BYTES + run.dataBytes;
        const at = logPos + run.at;
        p.noteRecord(at, recordBytes, bases[r], run.count, run.size);
        active.partitions.set(p, at + recordBytes);
      }
      this.#tail?.add(tailRecords(buffer, runs, parts, bases));
      return Promise.resolve(bases);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Bytes of the largest transaction written now if its first append takes `first`. */
  roomFor(first: number): number {
    return transactionRoom(this.#segments, this.#maxBytes, first);
  }

  /** Resolves once everything written so far is on disk. */
  sync(): Promise<void> {
    const active = this.#segments.at(-1);
    return active ? active.segment.sync() : Promise.resolve();
  }

  /**
   * Visits a partition's stored batches (`_batch.ts`) holding offsets from `fromOffset` on, in
   * order, until `visit` returns false; from memory when the tail cache holds them. `data` is a
   * view of a shared buffer: copy what is kept. `from`: `fromOffset`, or the partition's start.
   */
  readBatches(topicId: number, partition: number, fromOffset: number, visit: BatchVisitor) {
    const p = this.#partitions.get(topicId)?.[partition];
    if (!p) return;
    const from = Math.max(Math.floor(fromOffset), p.start);
    if (from >= p.next || this.#tail?.read(p, from, visit)) return;
    scanLog(this.#segments, p.scanStart(from), p.endPos, (header, _pos, buf, at) => {
      if (header.topicId !== topicId || header.partition !== partition) return true;
      if (header.baseOffset + header.count <= from) return true;
      const start = at + LOG_RECORD_HEADER_BYTES;
      const data = buf.subarray(start, start + header.dataBytes);
      return visit(data, header.baseOffset, header.count, from);
    }, true);
  }

  /**
   * Drops a partition's oldest retained records that `drop` accepts ({@link dropOldestRecords}).
   * Only in memory: the caller stores the floors, then {@link deleteRetainedOut}.
   */
  dropOldest(
    p: PartitionLog,
    drop: (timestampMicros: number, end: number) => boolean,
    maxRecords = Infinity,
  ): { messages: number; records: number } {
    return dropOldestRecords(this.#segments, p, drop, maxRecords);
  }

  /** A partition's oldest retained record, if it has one. */
  oldest(p: PartitionLog): OldestRecord | undefined {
    return oldestRecord(this.#segments, p);
  }

  /** Log position where the oldest segment ends (0 when none): what freeing it must pass. */
  get firstSegmentEnd(): number {
    const s = this.#segments[0];
    return s ? s.segment.base + s.segment.capacity : 0;
  }

  /** True when {@link deleteRetainedOut} would delete a segment. */
  hasRetainedOut(): boolean {
    return retainedOutSegments(this.#segments).length > 0;
  }

  /**
   * Deletes every segment, other than the active one, that no partition still needs: each
   * partition with records in it has dropped them all. Call only after the floors are stored.
   * Returns how many segments went.
   */
  async deleteRetainedOut(): Promise<number> {
    if (this.#readOnly) return 0;
    const gone = retainedOutSegments(this.#segments);
    if (gone.length === 0) return 0;
    const keep = this.#segments.filter((s) => !gone.includes(s));
    this.#segments.splice(0, this.#segments.length, ...keep);
    for (const s of gone) await s.segment.remove();
    this.room.freed();
    // The names' removal durable: a crash must not bring back a segment the floors skip.
    if (!this.#memory) await syncDirectory(this.#dir).catch(() => {});
    return gone.length;
  }

  /** Waits for writes under way, syncs, and closes every file. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.room.close();
    const spare = this.#spare;
    this.#spare = undefined;
    this.#tail?.clear();
    const segments = this.#segments.splice(0);
    for (const s of segments) await s.segment.close().catch(() => {});
    if (spare) await (await spare.segment.catch(() => undefined))?.close().catch(() => {});
  }

  /** The active segment with room for `bytes`, rolling to the next when it is full: the spare,
   * or one made now, smaller when that is what the bound or the disk (_disk_room.ts) leaves. */
  async #activeFor(bytes: number): Promise<SegmentState> {
    const active = this.#segments.at(-1);
    if (active && active.written + bytes <= active.segment.capacity) return active;
    if (!this.#spare) this.room.refuseEarly();
    const base = active ? active.segment.base + active.segment.capacity : 0;
    const next = this.#nextCapacity(active);
    const capacity = rollCapacity(this.#segments, this.#maxBytes, next, bytes);
    // The sealed segment must be on disk before records after it are: a crash must never
    // leave a gap (lost records in the middle of the log, newer ones after them).
    if (active) await active.segment.sync();
    const spare = this.#spare;
    this.#spare = undefined;
    const segment = await claimSpare(spare, base, bytes) ??
      await this.room.make((fits) => this.#create(base, fits), capacity, roundUp(bytes, 4096));
    this.room.placed();
    const state: SegmentState = { segment, written: 0, partitions: new Map() };
    this.#segments.push(state);
    return state;
  }

  /** Starts zero-filling the segment after the active one when it is time (`spareDue`). */
  #prepareSpare(): void {
    if (this.#memory || this.#readOnly || this.#spare) return;
    const active = this.#segments.at(-1);
    if (!active) return;
    const due = spareDue(this.#segments, this.#maxBytes, this.#nextCapacity(active));
    if (due === null || !this.room.spareFits(due.capacity)) return;
    const segment = this.#create(due.base, due.capacity);
    segment.catch(() => {}); // a failure shows when the roll awaits it
    this.#spare = { base: due.base, segment };
  }

  /** Size of the segment after `active` (the first one when there is none). */
  #nextCapacity(active: SegmentState | undefined): number {
    return nextSegmentBytes(this.#segmentBytes, active);
  }

  #create(base: number, capacity: number): Promise<Segment> {
    if (this.#memory) return Promise.resolve(new MemorySegment(base, capacity));
    return FileSegment.create(this.#dir, base, capacity, {
      cancelled: () => this.#closed,
      urgent: () => usedOfActive(this.#segments) > 1 / 2,
      // At QoS 0 rates the log is written faster than small steps fill, and the roll would wait
      // for the rest with every append behind it.
      behind: (filled) => filled < usedOfActive(this.#segments),
    });
  }

  /** Scans every segment in order, rebuilding partitions and segment states. */
  async #recover(): Promise<void> {
    if (this.#memory) return;
    if (!this.#readOnly) Deno.mkdirSync(this.#dir, { recursive: true });
    this.#scanNew();
    this.#epoch = this.#maxEpoch + 1;
    if (this.#readOnly) return;
    this.room.check();
    this.#spare = await reuseEmptyTail(this.#segments, (last) => this.#nextCapacity(last));
    this.#prepareSpare();
  }

  /**
   * A read-only log (the `read` CLI beside a running gateway): picks up the records and
   * segments the writer added since the last scan.
   */
  refresh(): void {
    if (this.#readOnly && !this.#closed) this.#scanNew();
  }

  /** Opens segment files not seen yet and scans every segment from where its records ended. */
  #scanNew(): void {
    this.#maxEpoch = scanNewSegments(
      this.#dir,
      this.#readOnly,
      this.#segments,
      this.#maxEpoch,
      (topicId, partition) => this.partition(topicId, partition),
    );
  }
}
