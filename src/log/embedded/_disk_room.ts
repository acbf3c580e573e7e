/**
 * Room on the disk that holds the message log (_message_log.ts), and what the log does when it
 * runs out. A new segment is zero-filled (_log_segment.ts), so making one on a full disk writes
 * until ENOSPC and then deletes what it wrote: done for every append, that is a write storm
 * while nothing is accepted, and it takes the last free bytes from every other program on the
 * disk. So before a segment is made the free space is measured (statfs, once per segment, never
 * per append): a segment smaller than usual is made when that is what fits above the reserve,
 * and when not even the next append fits, the refusal is remembered. Appends that need a new
 * segment then fail at once, with no write and no syscall, until a timer sees the room back
 * (checked every {@link DISK_RETRY_MS}) or the log frees room itself (retention deleted
 * segments). Deno measures a disk only through node:fs, whose modules are a visible share of
 * the gateway's memory at ready: it is loaded when first needed (the first
 * segment made or prepared, a refusal, `check`), so a gateway that has made no segment since it
 * started carries none of it, and until then its free space is said to be measured before the
 * next new segment.
 *
 * @module
 */
import { BackendError } from "../port.ts";

/**
 * Bytes the log leaves free on its disk: for the catalog (consumer offsets, floors, its WAL) and
 * for the other programs sharing the disk (an edge box's only SD card). A segment is made only
 * where it fits above this.
 */
export const DISK_RESERVE_BYTES = 4 * 1024 * 1024;

/** How often a disk that refused a segment is measured again. */
export const DISK_RETRY_MS = 500;

const BLOCK = 4096;

type StatFs = (dir: string) => { bavail: number | bigint; bsize: number | bigint };
let statfs: StatFs | undefined;
let loading: Promise<void> | undefined;

/** Loads what measures a disk (node:fs), once; resolves when {@link diskFreeBytes} can. */
export function loadDiskMeasure(): Promise<void> {
  loading ??= import("node:fs").then((fs) => {
    statfs = fs.statfsSync as unknown as StatFs;
  });
  return loading;
}

/**
 * Free bytes an unprivileged writer may use on the disk holding `dir`; undefined if unknown
 * (not measurable here, or not measured yet: see {@link loadDiskMeasure}).
 */
export function diskFreeBytes(dir: string): number | undefined {
  if (statfs === undefined) return undefined;
  try {
    const s = statfs(dir);
    return Number(s.bavail) * Number(s.bsize);
  } catch {
    return undefined; // not measurable here (no `sys` permission, odd filesystem): writes decide
  }
}

/** What an operator reads: where, how much is free, and what the store keeps. */
export function diskFullReason(dir: string, free: number, needed: number): string {
  return `The disk holding "${dir}" has ${free} bytes free, less than the ${DISK_RESERVE_BYTES} ` +
    `bytes the store keeps in reserve plus the ${needed} the next segment needs; appends fail ` +
    "until space is freed";
}

/** The free space of the disk holding `dir` against the reserve, for `check` and the start line. */
export function diskRoomLine(dir: string): string {
  const free = diskFreeBytes(dir);
  if (free === undefined && statfs === undefined) {
    return `the free space of the disk holding "${dir}" is measured before the store's next new segment`;
  }
  if (free === undefined) return `the free space of the disk holding "${dir}" cannot be measured`;
  const below = free < DISK_RESERVE_BYTES + BLOCK ? ", below it: appends are refused" : "";
  return `the disk holding "${dir}" has ${free} bytes free (reserve ${DISK_RESERVE_BYTES}${below})`;
}

/** The log's view of its disk: a remembered refusal, and the timer that lifts it. */
export class DiskRoom {
  readonly #dir: string;
  readonly #now: () => number;
  readonly #onRoom: () => void;
  #refusal: BackendError | undefined;
  /** Until then a refused roll is refused again without measuring. */
  #retryAt = 0;
  /** Bytes the refused roll needed: what the timer waits for. */
  #needed = 0;
  /** Until then no spare is measured for (a spare that did not fit). */
  #spareRetryAt = 0;
  #timer: ReturnType<typeof setInterval> | undefined;

  /** @param onRoom called when the timer finds room again after a refusal. */
  constructor(
    dir: string,
    onRoom: () => void = () => {},
    now: () => number = () => performance.now(),
  ) {
    this.#dir = dir;
    this.#onRoom = onRoom;
    this.#now = now;
  }

  /** The directory whose disk this is. */
  get dir(): string {
    return this.#dir;
  }

  /** Why new segments are refused, while they are. */
  get refusal(): BackendError | undefined {
    return this.#refusal;
  }

  /** Throws the remembered refusal until its retry time: no syscall, no write. */
  refuseEarly(): void {
    if (this.#refusal !== undefined && this.#now() < this.#retryAt) throw this.#refusal;
  }

  /**
   * The capacity of a new segment: `wanted`, or what the disk holds above the reserve when that
   * is less but still `needed`; throws BackendError("full") (remembered) when not even that.
   */
  fit(wanted: number, needed: number): number {
    const free = diskFreeBytes(this.#dir);
    if (free === undefined) return wanted;
    const room = Math.floor((free - DISK_RESERVE_BYTES) / BLOCK) * BLOCK;
    if (room >= wanted) return wanted;
    if (room >= needed) return room;
    throw this.#refuse(free, needed);
  }

  /** Makes a segment of `wanted` bytes or of what fits ({@link fit}); remembers ENOSPC. */
  async make<T>(create: (capacity: number) => Promise<T>, wanted: number, needed: number) {
    await loadDiskMeasure().catch(() => {}); // not measurable: writes decide
    try {
      return await create(this.fit(wanted, needed));
    } catch (e) {
      throw this.failed(e, needed);
    }
  }

  /** Whether a spare of `capacity` fits now; measured at most once per {@link DISK_RETRY_MS}. */
  spareFits(capacity: number): boolean {
    if (this.#refusal !== undefined || this.#now() < this.#spareRetryAt) return false;
    if (statfs === undefined) {
      void loadDiskMeasure().catch(() => {}); // the next preparation measures
      return false;
    }
    const free = diskFreeBytes(this.#dir);
    if (free === undefined || free - DISK_RESERVE_BYTES >= capacity) return true;
    this.#spareRetryAt = this.#now() + DISK_RETRY_MS;
    return false;
  }

  /** At open: a disk already below the reserve is refused from the start (when measured yet). */
  check(): void {
    const free = diskFreeBytes(this.#dir);
    if (free !== undefined && free < DISK_RESERVE_BYTES + BLOCK) this.#refuse(free, BLOCK);
  }

  /** A write or a zero-fill failed: ENOSPC is remembered as a refusal; returns what to throw. */
  failed(e: unknown, needed: number): unknown {
    if ((e as { code?: unknown } | null)?.code !== "ENOSPC") return e;
    return this.#refuse(diskFreeBytes(this.#dir) ?? 0, roundBlock(needed));
  }

  /** A segment was made: the disk had room. */
  placed(): void {
    this.#lift();
  }

  /** The log deleted segments: the next roll measures again instead of waiting. */
  freed(): void {
    this.#retryAt = 0;
    this.#spareRetryAt = 0;
  }

  /** Stops the timer. */
  close(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #refuse(free: number, needed: number): BackendError {
    void loadDiskMeasure().catch(() => {}); // the timer measures from then on
    this.#refusal = new BackendError("full", diskFullReason(this.#dir, free, needed), {
      bound: "disk",
    });
    this.#retryAt = this.#now() + DISK_RETRY_MS;
    this.#needed = needed;
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => this.#measure(), DISK_RETRY_MS);
      // A refusal alone must not keep a process (a test, the CLI) alive.
      Deno.unrefTimer(this.#timer);
    }
    return this.#refusal;
  }

  #measure(): void {
    const free = diskFreeBytes(this.#dir);
    if (free === undefined || free - DISK_RESERVE_BYTES < this.#needed) return;
    this.#lift();
    this.#onRoom();
  }

  #lift(): void {
    this.#refusal = undefined;
    this.#retryAt = 0;
    this.#spareRetryAt = 0;
    this.close();
  }
}

function roundBlock(n: number): number {
  return Math.ceil(n / BLOCK) * BLOCK;
}
