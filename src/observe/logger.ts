/**
 * JSON-lines logger with levels, secret redaction and a rate limit for repeated messages.
 * A line: `{"ts":"…","level":"info","msg":"…", …fields}`.
 *
 * @module
 */

/** Log levels in increasing severity. */
export type Level = "debug" | "info" | "warn" | "error";
/** Every level, lowest first. */
export const LEVELS: readonly Level[] = ["debug", "info", "warn", "error"];
const RANK: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };

/** Field names whose values are never written (any case, substring match). */
const SECRET_FIELD = /pass|secret|token|authorization|credential/i;

/** Where lines go (stdout by default; tests capture them). */
export type LogSink = (line: string) => void;

/** Structured logger. */
export class Logger {
  #min: number;
  #sink: LogSink;
  #now: () => number;
  /** Per message key: window start and count, to rate-limit floods of the same line. */
  #recent = new Map<string, { start: number; count: number; suppressed: number }>();
  /** At most this many equal messages per window; more are counted and summarised. */
  readonly maxPerWindow = 5;
  readonly windowMs = 10_000;

  constructor(level: Level = "info", sink?: LogSink, now: () => number = Date.now) {
    this.#min = RANK[level];
    this.#sink = sink ?? ((line) => console.log(line));
    this.#now = now;
  }

  /** The lowest level written now. */
  get level(): Level {
    return (Object.keys(RANK) as Level[]).find((l) => RANK[l] === this.#min)!;
  }

  /** Changes the lowest level written, at run time (the admin action; until a restart). */
  setLevel(level: Level): void {
    this.#min = RANK[level];
  }

  debug(msg: string, fields?: Record<string, unknown>): void {
    this.#write("debug", msg, fields, false);
  }
  info(msg: string, fields?: Record<string, unknown>): void {
    this.#write("info", msg, fields, false);
  }
  warn(msg: string, fields?: Record<string, unknown>): void {
    this.#write("warn", msg, fields, false);
  }
  error(msg: string, fields?: Record<string, unknown>): void {
    this.#write("error", msg, fields, false);
  }
  /** Like the level methods, but repeated `msg`s are rate-limited (per message text). */
  limited(level: Level, msg: string, fields?: Record<string, unknown>): void {
    this.#write(level, msg, fields, true);
  }

  #write(level: Level, msg: string, fields: Record<string, unknown> | undefined, limit: boolean) {
    if (RANK[level] < this.#min) return;
    const now = this.#now();
    let suppressed = 0;
    if (limit) {
      let r = this.#recent.get(msg);
      // Either way: a wall clock stepped back must not hold the window shut until it catches up.
      if (!r || Math.abs(now - r.start) >= this.windowMs) {
        suppressed = r?.suppressed ?? 0;
        r = { start: now, count: 0, suppressed: 0 };
        this.#recent.set(msg, r);
        // Bound the map: forget the oldest key when it grows large.
        if (this.#recent.size > 1000) this.#recent.delete(this.#recent.keys().next().value!);
      }
      if (++r.count > this.maxPerWindow) {
        r.suppressed++;
        return;
      }
    }
    const line: Record<string, unknown> = { ts: new Date(now).toISOString(), level, msg };
    if (fields) { for (const [k, v] of Object.entries(fields)) line[k] = redact(k, v); }
    if (suppressed > 0) line.suppressed = suppressed;
    this.#sink(JSON.stringify(line, jsonReplacer));
  }
}

function redact(key: string, value: unknown): unknown {
  if (SECRET_FIELD.test(key)) return "[redacted]";
  if (value instanceof Error) return value.message;
  return value;
}

function jsonReplacer(_key: string, value: unknown): unknown {
  if (typeof value === "bigint") return value.toString();
  if (value instanceof Uint8Array) return `<${value.length} bytes>`;
  return value;
}
