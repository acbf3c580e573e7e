/**
 * The message log: every stored batch of every partition, appended in commit order to one
 * sequence of preallocated segment files (_log_segment.ts), one fdatasync per group commit.
 * The catalog (topics, consumer offsets, each partition's floors) stays in SQLite; messages
 * no longer go through it. Measured against one SQLite row per batch in a WAL-mode file: each
 * stored message cost ~511 bytes of WAL plus ~200 of checkpoint for 157 bytes of data, each
 * PUBACK waited for a WAL fsync of ~40 KB, and checkpoints held commits while they copied.
 * Here a commit writes its records once, in place, and syncs them; nothing is copied later.
 *
 * One log rather than one file per partition: a group commit touches many partitions, and one
 * fsync per partition cost more than the single one (QoS 1 ingest into 3 partitions: 78k msg/s
 * with three files, 90–124k with one).
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
import { decodeBatch } from "./_batch.ts";
import type { StoredMessage } from "../port.ts";
import {
  LOG_RECORD_HEADER_BYTES,
  logRecordBytes,
  type LogRecordHeader,
  logRecordIntact,
  readLogRecordHeader,
  sealLogRecord,
} from "./_log_record.ts";
import {
  FileSegment,
  MemorySegment,
  type Segment,
  segmentBase,
  syncDirectory,
} from "./_log_segment.ts";

/** Largest segment; smaller stores get smaller ones (see {@link segmentBytesFor}). */
const MAX_SEGMENT_BYTES = 32 * 1024 * 1024;
const MIN_SEGMENT_BYTES = 16 * 1024;
/**
 * A new log's first segment: small, so that zero-filling it does not delay the first append
 * (a 32 MiB segment took up to half a second). Each next one is twice the one before, up to
 * the full size: a 32 MiB spare behind a 1 MiB segment held the first roll under QoS 1 load
 * for 171 ms.
 */
const FIRST_SEGMENT_BYTES = 1024 * 1024;

/**
 * Bytes of the active segment used before the next one is zero-filled. Waiting for a quarter
 * of a 32 MiB segment left too little time at QoS 0 rates (~38 MB/s): appends stalled behind
 * the fill (QoS 0 ingest 124k msg/s at 58% CPU).
 */
const SPARE_AFTER_BYTES = 1024 * 1024;

/** A partition gets an index entry after this many bytes of its own records... */
const INDEX_OWN_BYTES = 16 * 1024;
/** ...or after this much log of any partition since its last entry (bounds a read's scan). */
const INDEX_MAX_GAP_BYTES = 256 * 1024;
/** Bytes read at a time while scanning (a longer record is read whole). */
const SCAN_CHUNK_BYTES = 64 * 1024;

/** A partition's offsets as the catalog stored them (retention and the scan start there). */
export interface PartitionFloor {
  readonly start: number;
  readonly next: number;
}

/** One partition's view of the log. */
export class PartitionLog {
  readonly topicId: number;
  readonly partition: number;
  /** First retained offset: lower offsets are gone (or about to go with their segment). */
  start: number;
  /** Next offset to assign. */
  next: number;
  /** Retained bytes (payloads + encoded headers), for retention by size. */
  bytes = 0;
  /** Log position at or before this partition's first retained record. */
  startPos = 0;
  /** End of this partition's newest record; a scan past it finds nothing of it. */
  endPos = 0;
  /** Sparse index: offsets and positions of some records, ascending, from `indexHead` on. */
  readonly indexOffsets: number[] = [];
  readonly indexPositions: number[] = [];
  indexHead = 0;
  /** Own bytes since the last index entry. */
  bytesSinceIndex = 0;

  constructor(topicId: number, partition: number, floor: PartitionFloor | undefined) {
    this.topicId = topicId;
    this.partition = partition;
    this.start = floor?.start ?? 0;
    this.next = Math.max(floor?.next ?? 0, this.start);
  }

  /** Records a new record of this partition at `pos` (`bytes` long, first offset `base`). */
  noteRecord(pos: number, bytes: number, base: number, count: number, size: number): void {
    const entries = this.indexPositions.length;
    const lastEntry = entries > this.indexHead ? this.indexPositions[entries - 1] : -Infinity;
    if (
      entries === this.indexHead || this.bytesSinceIndex >= INDEX_OWN_BYTES ||
      pos - lastEntry >= INDEX_MAX_GAP_BYTES
    ) {
      this.indexOffsets.push(base);
      this.indexPositions.push(pos);
      this.bytesSinceIndex = 0;
    }
    this.bytesSinceIndex += bytes;
    if (this.bytes === 0 && this.endPos <= this.startPos) this.startPos = pos;
    this.next = Math.max(this.next, base + count);
    this.bytes += size;
    this.endPos = pos + bytes;
  }

  /** Where a scan for `offset` may start: the nearest index entry at or below it. */
  scanStart(offset: number): number {
    const offsets = this.indexOffsets;
    let lo = this.indexHead;
    let hi = offsets.length - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (offsets[mid] <= offset) {
        found = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found < 0 ? this.startPos : Math.max(this.startPos, this.indexPositions[found]);
  }

  /** Drops a retained-out prefix: offsets below `start`, positions below `startPos`. */
  dropPrefix(start: number, startPos: number, size: number): void {
    this.start = start;
    this.startPos = startPos;
    this.bytes = Math.max(0, this.bytes - size);
    const offsets = this.indexOffsets;
    // Keep the last entry at or below start; the ones before it can never be a scan start.
    while (this.indexHead + 1 < offsets.length && offsets[this.indexHead + 1] <= start) {
      this.indexHead++;
    }
    if (this.indexHead > 1024 && this.indexHead * 2 > offsets.length) {
      offsets.splice(0, this.indexHead);
      this.indexPositions.splice(0, this.indexHead);
      this.indexHead = 0;
    }
  }
}

/** A segment and what the log knows about it. */
interface SegmentState {
  readonly segment: Segment;
  /** Segment-relative end of its valid records (where the next record goes, if active). */
  written: number;
  /** For each partition with records here: the log position where its last one here ends. */
  readonly partitions: Map<PartitionLog, number>;
}

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
}

/** The key of a partition in {@link MessageLogOptions.floors}. */
export function partitionKey(topicId: number, partition: number): string {
  return `${topicId}/${partition}`;
}

/** Segments of an eighth of the store, between 16 KiB and 32 MiB. */
export function segmentBytesFor(maxBytes: number): number {
  const eighth = Math.floor(maxBytes / 8 / 4096) * 4096;
  return Math.min(MAX_SEGMENT_BYTES, Math.max(MIN_SEGMENT_BYTES, eighth));
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
  #spare: { base: number; segment: Promise<Segment> } | undefined;
  /** This writer's epoch (one more than any record found at open). */
  #epoch = 1;
  /** Highest epoch scanned so far. */
  #maxEpoch = 0;
  #closed = false;

  private constructor(options: MessageLogOptions) {
    this.#dir = options.dir;
    this.#memory = options.dir === ":memory:";
    this.#readOnly = options.readOnly ?? false;
    this.#maxBytes = options.maxBytes;
    this.#segmentBytes = options.segmentBytes ?? segmentBytesFor(options.maxBytes);
    this.#floors = options.floors;
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
    let total = 0;
    for (const s of this.#segments) total += s.segment.capacity;
    return total;
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
   * BackendError("full") when a new segment would pass the bound.
   */
  async append(buffer: Uint8Array, runs: readonly LogRun[], timestampMicros: number) {
    if (this.#readOnly || this.#closed) {
      throw new BackendError("unavailable", "The message log is not open for writing");
    }
    const bases: number[] = [];
    const parts: PartitionLog[] = [];
    for (const run of runs) {
      const p = this.partition(run.topicId, run.partition);
      // Offsets within one transaction: a partition may appear in one run only.
      bases.push(p.next);
      parts.push(p);
      sealLogRecord(buffer, run.at, {
        dataBytes: run.dataBytes,
        epoch: this.#epoch,
        topicId: run.topicId,
        partition: run.partition,
        count: run.count,
        size: run.size,
        baseOffset: p.next,
        timestampMicros,
      });
    }
    const active = await this.#activeFor(buffer.length);
    const pos = active.written;
    try {
      await active.segment.write(pos, buffer);
    } catch (e) {
      // The failed write may have left whole records past `pos`; the next transaction is
      // written over them, and a newer epoch keeps a scan from reading on into any of them
      // that outlast it.
      this.#epoch++;
      throw e;
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
    return bases;
  }

  /** Resolves once everything written so far is on disk. */
  sync(): Promise<void> {
    const active = this.#segments.at(-1);
    return active ? active.segment.sync() : Promise.resolve();
  }

  /**
   * Up to `limit` messages of a partition from `fromOffset` on, in offset order. Offsets below
   * the partition's start are skipped; so are records a crash left only partly written.
   */
  read(topicId: number, partition: number, fromOffset: number, limit: number): StoredMessage[] {
    const out: StoredMessage[] = [];
    const p = this.#partitions.get(topicId)?.[partition];
    if (!p || !(limit > 0)) return out;
    limit = Math.floor(limit);
    const from = Math.max(Math.floor(fromOffset), p.start);
    if (from >= p.next) return out;
    this.#scan(p.scanStart(from), p.endPos, (header, _pos, buf, at) => {
      if (header.topicId !== topicId || header.partition !== partition) return true;
      if (header.baseOffset + header.count <= from) return true;
      const data = buf.subarray(
        at + LOG_RECORD_HEADER_BYTES,
        at + LOG_RECORD_HEADER_BYTES + header.dataBytes,
      );
      decodeBatch(data, partition, header.baseOffset, header.count, from, limit, out);
      return out.length < limit;
    });
    return out;
  }

  /**
   * Walks a partition's oldest retained records, oldest first, and drops each one `drop`
   * accepts, stopping at the first it refuses (or after `maxRecords`). Returns the messages
   * and batches dropped. Only in memory: the caller stores the floors, then
   * {@link deleteRetainedOut}.
   */
  dropOldest(
    p: PartitionLog,
    drop: (timestampMicros: number) => boolean,
    maxRecords = Infinity,
  ): { messages: number; records: number } {
    let dropped = 0;
    let records = 0;
    this.#scanRetained(p, (header, pos) => {
      if (records >= maxRecords || !drop(header.timestampMicros)) return false;
      records++;
      const end = header.baseOffset + header.count;
      dropped += end - Math.max(header.baseOffset, p.start);
      p.dropPrefix(end, pos + LOG_RECORD_HEADER_BYTES + header.dataBytes, header.size);
      return true;
    });
    return { messages: dropped, records };
  }

  /** Position and timestamp of a partition's oldest retained record, if it has one. */
  oldest(p: PartitionLog): { pos: number; timestampMicros: number; size: number } | undefined {
    let found: { pos: number; timestampMicros: number; size: number } | undefined;
    this.#scanRetained(p, (header, pos) => {
      found = { pos, timestampMicros: header.timestampMicros, size: header.size };
      return false;
    });
    return found;
  }

  /** Visits a partition's retained records, oldest first, until `visit` returns false. */
  #scanRetained(p: PartitionLog, visit: (header: LogRecordHeader, pos: number) => boolean) {
    this.#scan(p.startPos, p.endPos, (header, pos) => {
      if (header.topicId !== p.topicId || header.partition !== p.partition) return true;
      if (header.baseOffset + header.count <= p.start) return true;
      return visit(header, pos);
    });
  }

  /** True when {@link deleteRetainedOut} would delete a segment. */
  hasRetainedOut(): boolean {
    return this.#retainedOut().length > 0;
  }

  /** Segments, other than the active one, that no partition needs any more. */
  #retainedOut(): SegmentState[] {
    const last = this.#segments.length - 1;
    return this.#segments.filter((s, i) => {
      if (i === last) return false;
      for (const [p, end] of s.partitions) if (p.startPos < end) return false;
      return true;
    });
  }

  /**
   * Deletes every segment, other than the active one, that no partition still needs: each
   * partition with records in it has dropped them all. Call only after the floors are stored.
   * Returns how many segments went.
   */
  async deleteRetainedOut(): Promise<number> {
    if (this.#readOnly) return 0;
    const gone = this.#retainedOut();
    if (gone.length === 0) return 0;
    const keep = this.#segments.filter((s) => !gone.includes(s));
    this.#segments.splice(0, this.#segments.length, ...keep);
    for (const s of gone) await s.segment.remove();
    // The names' removal durable: a crash must not bring back a segment the floors skip.
    if (!this.#memory) await syncDirectory(this.#dir).catch(() => {});
    return gone.length;
  }

  /** Waits for writes under way, syncs, and closes every file. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const spare = this.#spare;
    this.#spare = undefined;
    const segments = this.#segments.splice(0);
    for (const s of segments) await s.segment.close().catch(() => {});
    if (spare) await (await spare.segment.catch(() => undefined))?.close().catch(() => {});
  }

  /** The active segment with room for `bytes`, rolling to the next when it is full. */
  async #activeFor(bytes: number): Promise<SegmentState> {
    const active = this.#segments.at(-1);
    if (active && active.written + bytes <= active.segment.capacity) return active;
    const base = active ? active.segment.base + active.segment.capacity : 0;
    // The last segment that fits under the bound may be smaller than usual.
    const room = Math.floor((this.#maxBytes - this.bytes) / 4096) * 4096;
    const capacity = Math.min(Math.max(this.#nextCapacity(active), roundUp(bytes, 4096)), room);
    if (capacity < bytes) {
      throw new BackendError(
        "full",
        `The message log is full: ${this.bytes} of ${this.#maxBytes} bytes in segments`,
      );
    }
    // The sealed segment must be on disk before records after it are: a crash must never
    // leave a gap (lost records in the middle of the log, newer ones after them).
    if (active) await active.segment.sync();
    const spare = this.#spare;
    this.#spare = undefined;
    let segment: Segment | undefined;
    if (spare?.base === base) {
      segment = await spare.segment.catch(() => undefined); // made again below if it failed
      if (segment && segment.capacity < bytes) {
        await segment.remove();
        segment = undefined;
      }
    } else if (spare) {
      await (await spare.segment.catch(() => undefined))?.remove();
    }
    segment ??= await this.#create(base, capacity);
    const state: SegmentState = { segment, written: 0, partitions: new Map() };
    this.#segments.push(state);
    return state;
  }

  /**
   * Starts zero-filling the segment after the active one once {@link SPARE_AFTER_BYTES} of the
   * active one are used (a store that sees little traffic never makes one; a busy one has
   * nearly a whole segment's time to fill it), if the bound leaves room.
   */
  #prepareSpare(): void {
    if (this.#memory || this.#readOnly || this.#spare) return;
    const active = this.#segments.at(-1);
    const after = Math.min(SPARE_AFTER_BYTES, active ? active.segment.capacity / 4 : 0);
    if (!active || active.written < after) return;
    const base = active.segment.base + active.segment.capacity;
    const capacity = this.#nextCapacity(active);
    if (this.bytes + capacity > this.#maxBytes) return;
    const segment = this.#create(base, capacity);
    segment.catch(() => {}); // a failure shows when the roll awaits it
    this.#spare = { base, segment };
  }

  /** Size of the segment after `active` (the first one when there is none). */
  #nextCapacity(active: SegmentState | undefined): number {
    const full = this.#segmentBytes;
    if (!active) return Math.min(full, FIRST_SEGMENT_BYTES);
    return Math.min(full, Math.max(active.segment.capacity * 2, FIRST_SEGMENT_BYTES));
  }

  #create(base: number, capacity: number): Promise<Segment> {
    if (this.#memory) return Promise.resolve(new MemorySegment(base, capacity));
    return FileSegment.create(this.#dir, base, capacity, {
      cancelled: () => this.#closed,
      urgent: () => {
        const active = this.#segments.at(-1);
        return !active || active.written > active.segment.capacity / 2;
      },
    });
  }

  /** Scans every segment in order, rebuilding partitions and segment states. */
  async #recover(): Promise<void> {
    if (this.#memory) return;
    if (!this.#readOnly) Deno.mkdirSync(this.#dir, { recursive: true });
    this.#scanNew();
    this.#epoch = this.#maxEpoch + 1;
    if (this.#readOnly) return;
    // Empty segments after the last record: spares made ahead of need. The one right after the
    // last record's segment is the spare again; the rest go, so that restarts never pile up
    // empty files. The last segment with records stays active: appends continue where its
    // valid records end (overwriting a torn tail; see the epoch in _log_record.ts).
    const segments = this.#segments;
    const empty: SegmentState[] = [];
    while (segments.length > 0 && segments.at(-1)!.written === 0) empty.unshift(segments.pop()!);
    const last = segments.at(-1);
    const nextBase = last ? last.segment.base + last.segment.capacity : 0;
    for (const s of empty) {
      const base = s.segment.base;
      if (!this.#spare && base === nextBase && s.segment.capacity === this.#nextCapacity(last)) {
        this.#spare = { base, segment: Promise.resolve(s.segment) };
      } else {
        await s.segment.remove();
      }
    }
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
    const known = this.#segments.at(-1)?.segment.base ?? -1;
    const bases: number[] = [];
    try {
      for (const entry of Deno.readDirSync(this.#dir)) {
        const base = entry.isFile ? segmentBase(entry.name) : undefined;
        if (base !== undefined && base > known) bases.push(base);
      }
    } catch (e) {
      if (!(this.#readOnly && e instanceof Deno.errors.NotFound)) throw e;
    }
    // Only the last segment with records may have grown (an empty spare may follow it); the
    // new ones are scanned whole.
    let first = this.#segments.length - 1;
    while (first > 0 && this.#segments[first].written === 0) first--;
    first = Math.max(0, first);
    for (const base of bases.sort((a, b) => a - b)) {
      this.#segments.push({
        segment: FileSegment.open(this.#dir, base),
        written: 0,
        partitions: new Map(),
      });
    }
    for (let i = first; i < this.#segments.length; i++) {
      const state = this.#segments[i];
      const base = state.segment.base;
      this.#scanSegment(state, state.written, state.segment.capacity, (h, pos) => {
        if (h.epoch < this.#maxEpoch) return false; // stale: past an earlier crash's torn tail
        this.#maxEpoch = h.epoch;
        const recordBytes = LOG_RECORD_HEADER_BYTES + h.dataBytes;
        state.written = pos - base + recordBytes;
        const p = this.partition(h.topicId, h.partition);
        if (h.baseOffset + h.count <= p.start) return true; // retained out already
        p.noteRecord(pos, recordBytes, h.baseOffset, h.count, h.size);
        state.partitions.set(p, pos + recordBytes);
        return true;
      });
    }
  }

  /**
   * Visits the valid records from log position `from` to `until` in order; `visit` returns
   * false to stop. Records that fail their checksum end the scan of their segment.
   */
  #scan(from: number, until: number, visit: Visitor): void {
    const segments = this.#segments;
    let i = segmentIndex(segments, from);
    let pos = from;
    for (; i < segments.length && pos < until; i++) {
      const s = segments[i];
      const rel = Math.max(0, pos - s.segment.base);
      if (!this.#scanSegment(s, rel, s.written, visit, until)) return;
      if (i + 1 < segments.length) pos = segments[i + 1].segment.base;
    }
  }

  /**
   * Visits the records of one segment from `rel` to `limit` (segment-relative). Returns true
   * when the segment's records ran out (the caller may go on to the next segment), false when
   * `visit` stopped the scan.
   */
  #scanSegment(
    s: SegmentState,
    rel: number,
    limit: number,
    visit: Visitor,
    until = Infinity,
  ): boolean {
    const base = s.segment.base;
    let pos = rel;
    while (pos < limit && base + pos < until) {
      // Never past `until`: a poll near a partition's end reads only what it needs.
      const want = Math.min(SCAN_CHUNK_BYTES, limit - pos, until - (base + pos));
      let buf = new Uint8Array(want);
      let got = s.segment.readAt(pos, buf);
      let view = new DataView(buf.buffer, 0, got);
      let at = 0;
      let progressed = false;
      while (at < got && base + pos + at < until) {
        let bytes = logRecordBytes(view, at, got);
        if (bytes === 0 && at === 0) {
          // Maybe one record longer than the chunk: read it whole.
          const headerBytes = got >= 8 ? LOG_RECORD_HEADER_BYTES + view.getUint32(4, true) : 0;
          if (headerBytes > got && headerBytes <= limit - pos) {
            buf = new Uint8Array(headerBytes);
            got = s.segment.readAt(pos, buf);
            view = new DataView(buf.buffer, 0, got);
            bytes = logRecordBytes(view, 0, got);
          }
        }
        if (bytes === 0) break;
        if (!logRecordIntact(buf, view, at, bytes)) return true;
        const header = readLogRecordHeader(view, at);
        if (!visit(header, base + pos + at, buf, at)) return false;
        at += bytes;
        progressed = true;
      }
      if (!progressed) return true; // no record here: the end of this segment's valid records
      pos += at;
    }
    return true;
  }
}

/** Sees one record: its header, its log position, and the buffer holding it from `at`. */
type Visitor = (header: LogRecordHeader, pos: number, buf: Uint8Array, at: number) => boolean;

/** Index of the segment holding log position `pos` (or the first after it). */
function segmentIndex(segments: readonly SegmentState[], pos: number): number {
  let lo = 0;
  let hi = segments.length - 1;
  let found = 0;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (segments[mid].segment.base <= pos) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}

function roundUp(n: number, to: number): number {
  return Math.ceil(n / to) * to;
}
