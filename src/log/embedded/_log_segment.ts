/**
 * One segment of the message log (_message_log.ts): a file of fixed capacity, zero-filled and
 * synced before its first record, so that appending overwrites blocks that already exist and
 * each fdatasync flushes data only. Appending to a growing file instead makes every fdatasync
 * commit the filesystem's journal too, which slows QoS 1 ingest.
 *
 * A file is named after its base: the log position of its first byte, zero-padded to
 * {@link NAME_DIGITS} digits, so that names sort in log order. Positions only grow: a new
 * segment's base is the previous base plus the previous capacity.
 *
 * Stores at ":memory:" keep segments in memory behind the same interface.
 *
 * @module
 */
import { syncDirectory } from "../durable_file.ts";
import { FileSync } from "./_file_sync.ts";

const NAME_DIGITS = 16;
const SUFFIX = ".log";
/**
 * Zero-filling writes and syncs this much at a time, then pauses unless the log needs the
 * segment soon: one big fsync at the end of a whole segment holds every fdatasync of the active
 * segment behind it (the PUBACK latency tail under QoS 1 load); small synced steps keep each
 * wait short.
 */
const FILL_CHUNK_BYTES = 128 * 1024;
/**
 * The step while the fill is behind the log (FillControl.behind). Each step is two hops to
 * a blocking thread (write, fsync), and each hop waits for the event loop's next turn: under
 * ingest load a small step paced the fill below the log's write rate, and every roll waited
 * for the rest of it with every append stalled behind it.
 */
const URGENT_FILL_CHUNK_BYTES = 1024 * 1024;
const FILL_PAUSE_MS = 1;

/** How the log steers a segment's zero-filling. */
export interface FillControl {
  /** True once the log closes: stop, remove the file, reject. */
  cancelled(): boolean;
  /** True while the active segment is close to full: no pauses between steps. */
  urgent(): boolean;
  /** True while the part filled (0 to 1) is behind the log: bigger steps. */
  behind(filled: number): boolean;
}

const UNSTEERED: FillControl = {
  cancelled: () => false,
  urgent: () => false,
  behind: () => false,
};

/** A segment's bytes, on disk or in memory. */
export interface Segment {
  /** Log position of the segment's byte 0. */
  readonly base: number;
  readonly capacity: number;
  /** Reads up to `into.length` bytes at `pos` (segment-relative); returns how many. */
  readAt(pos: number, into: Uint8Array): number;
  /** Writes `data` at `pos` (segment-relative), synchronously (the page cache); throws. */
  write(pos: number, data: Uint8Array): void;
  /** Everything written before the call is on disk once it resolves. */
  sync(): Promise<void>;
  /** Closes the handles (waiting for syncs under way). */
  close(): Promise<void>;
  /** Closes and deletes the segment. */
  remove(): Promise<void>;
}

/** The file name of the segment at `base`. */
export function segmentName(base: number): string {
  return String(base).padStart(NAME_DIGITS, "0") + SUFFIX;
}

/** The base of a segment file name, or undefined for any other name. */
export function segmentBase(name: string): number | undefined {
  if (name.length !== NAME_DIGITS + SUFFIX.length || !name.endsWith(SUFFIX)) return undefined;
  const digits = name.slice(0, NAME_DIGITS);
  return /^[0-9]+$/.test(digits) ? Number(digits) : undefined;
}

/**
 * A segment file. Reads and record writes are synchronous (the page cache); zero-fill and syncs
 * are not.
 */
export class FileSegment implements Segment {
  readonly base: number;
  readonly capacity: number;
  readonly path: string;
  readonly #reader: Deno.FsFile;
  #writer: Deno.FsFile | undefined;
  /** Where the writer's file position is after the last complete write; -1: unknown. */
  #writerAt = -1;
  readonly #sync: FileSync;

  private constructor(path: string, base: number, capacity: number, reader: Deno.FsFile) {
    this.path = path;
    this.base = base;
    this.capacity = capacity;
    this.#reader = reader;
    this.#sync = new FileSync(path);
  }

  /** Opens an existing segment file (its size is its capacity). */
  static open(dir: string, base: number): FileSegment {
    const path = `${dir}/${segmentName(base)}`;
    const reader = Deno.openSync(path, { read: true });
    return new FileSegment(path, base, reader.statSync().size, reader);
  }

  /**
   * Creates a zero-filled segment of `capacity` bytes and makes it and its name durable
   * (the file's data, then the directory). A leftover file of that name is replaced.
   */
  static async create(
    dir: string,
    base: number,
    capacity: number,
    control: FillControl = UNSTEERED,
  ): Promise<FileSegment> {
    const path = `${dir}/${segmentName(base)}`;
    const file = await Deno.open(path, { write: true, create: true, truncate: true });
    try {
      const zeros = new Uint8Array(Math.min(URGENT_FILL_CHUNK_BYTES, capacity));
      for (let done = 0; done < capacity;) {
        const step = control.behind(done / capacity) ? URGENT_FILL_CHUNK_BYTES : FILL_CHUNK_BYTES;
        const chunk = zeros.subarray(0, Math.min(step, capacity - done));
        for (let written = 0; written < chunk.length;) {
          written += await file.write(chunk.subarray(written));
        }
        done += chunk.length;
        await file.sync(); // the size grows as it fills: fsync, not fdatasync
        if (control.cancelled()) throw new Error(`Zero-filling ${path} was cancelled`);
        if (done < capacity && !control.urgent() && !control.behind(done / capacity)) {
          await new Promise((r) => setTimeout(r, FILL_PAUSE_MS));
        }
      }
    } catch (e) {
      file.close();
      await Deno.remove(path).catch(() => {});
      throw e;
    }
    file.close();
    await syncDirectory(dir);
    return FileSegment.open(dir, base);
  }

  readAt(pos: number, into: Uint8Array): number {
    const reader = this.#reader;
    reader.seekSync(pos, Deno.SeekMode.Start);
    let done = 0;
    while (done < into.length) {
      const n = reader.readSync(into.subarray(done));
      if (n === null || n === 0) break;
      done += n;
    }
    return done;
  }

  /**
   * Synchronous: a write into the page cache of already-allocated blocks takes microseconds,
   * and two thread hops per commit (seek, write) cost more than that, on the path of every
   * PUBACK and every live delivery. The fsync, which does wait for the disk, stays off the event
   * loop.
   */
  write(pos: number, data: Uint8Array): void {
    this.#writer ??= Deno.openSync(this.path, { write: true });
    const writer = this.#writer;
    // Records follow each other: a seek (a syscall) only when this write does not start where
    // the last complete one ended. A failed write leaves the position anywhere.
    if (this.#writerAt !== pos) writer.seekSync(pos, Deno.SeekMode.Start);
    this.#writerAt = -1;
    for (let done = 0; done < data.length;) done += writer.writeSync(data.subarray(done));
    this.#writerAt = pos + data.length;
  }

  sync(): Promise<void> {
    return this.#sync.sync();
  }

  async close(): Promise<void> {
    await this.#sync.close();
    closeQuietly(this.#reader);
    if (this.#writer) closeQuietly(this.#writer);
    this.#writer = undefined;
    this.#writerAt = -1;
  }

  async remove(): Promise<void> {
    await this.close();
    await Deno.remove(this.path).catch((e) => {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    });
  }
}

/** A segment of a ":memory:" store. */
export class MemorySegment implements Segment {
  readonly base: number;
  readonly capacity: number;
  readonly #bytes: Uint8Array;

  constructor(base: number, capacity: number) {
    this.base = base;
    this.capacity = capacity;
    this.#bytes = new Uint8Array(capacity);
  }

  readAt(pos: number, into: Uint8Array): number {
    const part = this.#bytes.subarray(pos, pos + into.length);
    into.set(part);
    return part.length;
  }

  write(pos: number, data: Uint8Array): void {
    this.#bytes.set(data, pos);
  }

  sync(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  remove(): Promise<void> {
    return Promise.resolve();
  }
}

function closeQuietly(file: Deno.FsFile): void {
  try {
    file.close();
  } catch { /* already closed */ }
}
