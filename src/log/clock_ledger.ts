/**
 * What the wall clock did, kept beside the embedded store (`<embedded.path>-clock.json`) so a
 * restart ages what is stored as the run before did: the age shifts of the clock's forward
 * steps (`base/wall_clock.ts`), and when the last run started and was last seen running.
 *
 * At start the file is read before anything is aged. The box's clock cannot be trusted across
 * a stop (an edge box without a battery-backed clock boots with a stale time and steps when
 * NTP answers, maybe days later), so the time the gateway was stopped does not count toward
 * any age: what was stored before this start is shifted by the gap since the last run was last
 * seen running. A clock that now reads earlier than that sighting (the stored times lie in the
 * future) is logged with both times; nothing is moved for it (what is stored then looks younger,
 * never older). With no ledger to read (a first start after an upgrade from a version without
 * one, a deleted or unusable file), the store's newest message stands in for the last sighting
 * once the store is open ({@link ClockLedger.judgeByNewestStored}): the same judgement, so the
 * time since it counts toward no age (including any time the last run went on without storing).
 *
 * @module
 */
import { type AgeShift, JUMP_THRESHOLD_MS, type WallClock } from "../base/wall_clock.ts";
import type { Logger } from "../observe/logger.ts";
import { replaceFileDurably } from "./durable_file.ts";

/** How often the running gateway records that it is running (ms). */
export const SIGHTING_INTERVAL_MS = 60_000;

interface LedgerFile {
  readonly version: 1;
  readonly shifts: readonly AgeShift[];
  /** This run: when it started and when it was last seen running (wall ms). */
  readonly run: { readonly startedMs: number; readonly lastSeenMs: number };
}

/** The ledger file of the store at `storePath`. */
export function clockLedgerPath(storePath: string): string {
  return `${storePath}-clock.json`;
}

/** Keeps `clock`'s shifts and this run's sightings in a file; see the module comment. */
export class ClockLedger {
  readonly #path: string;
  readonly #clock: WallClock;
  readonly #startedMs: number;
  #timer: ReturnType<typeof setInterval> | undefined;
  #writing: Promise<void> = Promise.resolve();
  #unwatch = () => {};
  /** Whether a ledger was read: without one, the store's newest message is judged instead. */
  readonly #read: boolean;

  private constructor(path: string, clock: WallClock, read: boolean) {
    this.#path = path;
    this.#clock = clock;
    this.#startedMs = clock.now();
    this.#read = read;
  }

  /**
   * Reads the file (a missing one is a first run; an unreadable or malformed one is logged and
   * started afresh), restores the shifts and moves what the last run stored past the stop. Writes
   * nothing: before the store opens, its directory may not exist yet.
   */
  static async read(path: string, clock: WallClock, logger: Logger): Promise<ClockLedger> {
    const last = await readLedger(path, logger);
    const ledger = new ClockLedger(path, clock, last !== null);
    if (last) {
      clock.restore(last.shifts);
      judgeStop({ last_run_seen: last.run.lastSeenMs }, ledger.#startedMs, clock, logger);
    }
    return ledger;
  }

  /** True when no ledger was read: the store's newest message must stand in for it. */
  get missing(): boolean {
    return !this.#read;
  }

  /**
   * Judges the stop by the store's newest stored message (wall ms) as {@link read} judges it by
   * the last run's sighting; call once the store is open, before anything is aged, and only
   * when the ledger was {@link missing}.
   */
  judgeByNewestStored(newestMs: number, logger: Logger): void {
    judgeStop({ newest_stored: newestMs }, this.#startedMs, this.#clock, logger);
  }

  /**
   * Writes the file for this run, then a sighting every `SIGHTING_INTERVAL_MS` and at once after
   * a step. Throws when the file cannot be written.
   */
  async start(): Promise<void> {
    await this.#write();
    this.#timer = setInterval(() => this.#save(), SIGHTING_INTERVAL_MS);
    Deno.unrefTimer(this.#timer as unknown as number);
    this.#unwatch = this.#clock.onJump(() => this.#save());
  }

  /** Records the last sighting (the stop), if started. */
  async close(): Promise<void> {
    if (this.#timer === undefined) return;
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#unwatch();
    this.#save();
    await this.#writing;
  }

  #save(): void {
    this.#writing = this.#writing.then(() => this.#write()).catch(() => {});
  }

  async #write(): Promise<void> {
    const file: LedgerFile = {
      version: 1,
      shifts: this.#clock.shifts,
      run: { startedMs: this.#startedMs, lastSeenMs: this.#clock.now() },
    };
    await replaceFileDurably(this.#path, JSON.stringify(file) + "\n");
  }
}

async function readLedger(path: string, logger: Logger): Promise<LedgerFile | null> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    logger.warn("Cannot read the clock ledger; ages count from stored timestamps", {
      path,
      error: e instanceof Error ? e.message : String(e),
    });
    return null;
  }
  const file = parseLedger(text);
  if (file === null) {
    logger.warn("Clock ledger is malformed; ages count from stored timestamps", { path });
  }
  return file;
}

/** The ledger in `text`, or null when it is not one. */
export function parseLedger(text: string): LedgerFile | null {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return null;
  }
  const r = raw as Partial<LedgerFile> | null;
  const isNumber = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
  if (r?.version !== 1 || !Array.isArray(r.shifts) || !r.run) return null;
  if (!isNumber(r.run.startedMs) || !isNumber(r.run.lastSeenMs)) return null;
  const shifts = r.shifts.filter((s) => isNumber(s?.beforeMs) && isNumber(s?.shiftMs));
  return { version: 1, shifts, run: r.run };
}

/** What stands for the last run's end: its last sighting, or the store's newest message. */
type LastSeen = { readonly last_run_seen: number } | { readonly newest_stored: number };

const BEHIND_WORDS = {
  last_run_seen: "the last run was seen",
  newest_stored: "the newest stored message",
};

/** The stop between the last run and this one, as `startedMs` sees it. */
function judgeStop(seen: LastSeen, startedMs: number, clock: WallClock, logger: Logger): void {
  const [key, lastSeenMs] = Object.entries(seen)[0] as [keyof typeof BEHIND_WORDS, number];
  const gap = startedMs - lastSeenMs;
  const times = {
    now: new Date(startedMs).toISOString(),
    [key]: new Date(lastSeenMs).toISOString(),
  };
  if (gap < -JUMP_THRESHOLD_MS) {
    logger.warn(
      `Wall clock reads earlier than ${BEHIND_WORDS[key]}: stored times lie in the future; ` +
        "they count as new until the clock passes them (order the unit after time sync)",
      { ...times, behind_s: Math.round(-gap / 1000) },
    );
  } else if (gap > JUMP_THRESHOLD_MS) {
    // Up to the start, not the sighting: what came after the last sighting (a crash leaves up
    // to a minute) was stored before the stop too.
    clock.shift(startedMs, gap);
    logger.info("The time the gateway was stopped does not count toward stored ages", {
      ...times,
      stopped_s: Math.round(gap / 1000),
    });
  }
}
