/**
 * The wall clock as the gateway ages things by. Stored times stay what the box's clock read
 * when they were made (a message's timestamp is what `$replay/time:` and Iggy's tools read);
 * an age is the wall time now minus a stored time moved by the forward steps of the clock
 * since it was recorded (`corrected`). A step is found by comparing the wall clock with the
 * monotonic one, which does not step: NTP's first answer on a box that booted with a stale
 * clock moves the wall clock by days, not the time that passed.
 *
 * Only forward steps move stored times: after one, everything recorded before it is younger
 * than its timestamp says, by the step. A backward step moves nothing; what was recorded
 * before it then looks younger than it is (it is kept that much longer, never deleted early),
 * and what comes after may carry timestamps below earlier ones.
 *
 * @module
 */

/** A step of the wall clock against the monotonic clock. */
export interface ClockJump {
  /** Wall time just after the step (ms since the epoch). */
  readonly atMs: number;
  /** Size of the step in ms: positive forward, negative backward. */
  readonly stepMs: number;
}

/** Stored times up to `beforeMs` (as the clock read them) are `shiftMs` younger than they say. */
export interface AgeShift {
  readonly beforeMs: number;
  readonly shiftMs: number;
}

/** The two clocks read (injected by tests). */
export interface ClockSource {
  /** Wall clock, ms since the epoch. */
  wall(): number;
  /** Monotonic clock, ms. */
  mono(): number;
}

/** A difference between the two clocks smaller than this is drift and slewing, not a step. */
export const JUMP_THRESHOLD_MS = 5_000;
/**
 * Age shifts remembered; past this the two oldest become one (their sum, up to the later one's
 * time): what lay between them then counts the older one's shift too, younger, never older.
 */
export const MAX_AGE_SHIFTS = 64;

const systemSource: ClockSource = { wall: Date.now, mono: () => performance.now() };

/** See the module comment. */
export class WallClock {
  readonly #source: ClockSource;
  /** Wall minus monotonic, as of the last step (or the start). */
  #offset: number;
  #shifts: AgeShift[] = [];
  #listeners: ((jump: ClockJump) => void)[] = [];
  #jumps = 0;
  #lastJump: ClockJump | null = null;

  constructor(source: ClockSource = systemSource) {
    this.#source = source;
    this.#offset = source.wall() - source.mono();
  }

  /** Wall time now, ms since the epoch; notices a step since the last read. */
  now(): number {
    const wall = this.#source.wall();
    const step = wall - this.#source.mono() - this.#offset;
    if (step > JUMP_THRESHOLD_MS || step < -JUMP_THRESHOLD_MS) this.#stepped(wall, step);
    return wall;
  }

  /** `now()` in µs (the log's timestamp unit). */
  nowMicros(): number {
    return this.now() * 1000;
  }

  /** A wall time recorded earlier (ms), moved by the forward steps since: ages count from it. */
  corrected(ms: number): number {
    for (const s of this.#shifts) if (ms <= s.beforeMs) ms += s.shiftMs;
    return ms;
  }

  /** `corrected` for a time in µs. */
  correctedMicros(micros: number): number {
    for (const s of this.#shifts) if (micros <= s.beforeMs * 1000) micros += s.shiftMs * 1000;
    return micros;
  }

  /** Ms actually passed since the wall time `ms` was recorded (negative if it lies ahead). */
  since(ms: number): number {
    const now = this.now();
    return now - this.corrected(ms);
  }

  /** Records that what was stored up to `beforeMs` is `shiftMs` younger (a forward move). */
  shift(beforeMs: number, shiftMs: number): void {
    if (!(shiftMs > 0)) return;
    this.#shifts.push({ beforeMs, shiftMs });
    this.#bound();
  }

  /** The shifts in force, oldest first (what a restart must get back). */
  get shifts(): readonly AgeShift[] {
    return this.#shifts;
  }

  /** Restores the shifts of past runs (before any of this run's). */
  restore(shifts: readonly AgeShift[]): void {
    this.#shifts = [...shifts, ...this.#shifts];
    this.#bound();
  }

  #bound(): void {
    while (this.#shifts.length > MAX_AGE_SHIFTS) {
      const [a, b] = this.#shifts;
      this.#shifts.splice(0, 2, { beforeMs: b.beforeMs, shiftMs: a.shiftMs + b.shiftMs });
    }
  }

  /** Steps seen since start. */
  get jumps(): number {
    return this.#jumps;
  }

  get lastJump(): ClockJump | null {
    return this.#lastJump;
  }

  /** `listener` hears of each step, once, when it is noticed; returns its removal. */
  onJump(listener: (jump: ClockJump) => void): () => void {
    this.#listeners.push(listener);
    return () => void (this.#listeners = this.#listeners.filter((l) => l !== listener));
  }

  #stepped(wall: number, step: number): void {
    this.#offset += step;
    // The old timeline's now: every time recorded before the step is at most this.
    if (step > 0) this.shift(wall - step, step);
    const jump = { atMs: wall, stepMs: step };
    this.#jumps++;
    this.#lastJump = jump;
    for (const l of this.#listeners) l(jump);
  }
}

/** The process's wall clock: what the gateway's parts age by unless a test gives its own. */
export const wallClock: WallClock = new WallClock();
