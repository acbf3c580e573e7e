/**
 * The uplink's state, in one place: the forwarder's upstream Iggy (forward mode) or the Iggy
 * backend itself (Iggy mode). Every lane and connection reports into it; it logs one
 * `Uplink down` when an outage starts (the reason, what waits) and one `Uplink up` when the
 * backlog that waited through it is forwarded (how long it was down, what waited, how long the
 * drain took), however many partitions or connections saw the outage. `/status.json`, the
 * status page and `/metrics` read its {@link UplinkFields}.
 *
 * @module
 */
import { wallClock } from "../base/wall_clock.ts";
import type { Logger } from "./logger.ts";

/** What waits for the uplink, as its owner measures it. */
export interface UplinkBacklog {
  readonly messages: number;
  /** Bytes of the records still to send (payloads and encoded headers). */
  readonly bytes: number;
  /** Append time of the oldest waiting message (µs since the epoch), or null when none. */
  readonly oldestMicros: number | null;
}

/** What an uplink's owner gives it. */
export interface UplinkSource {
  /** Where the uplink goes, in words (`Iggy at 10.0.0.5:8090`). */
  readonly name: string;
  /** What waits now; Iggy mode has no backlog of its own (devices are refused meanwhile). */
  backlog?(): UplinkBacklog;
  /** Messages confirmed upstream since start (the drain's progress and rate). */
  forwarded?(): number;
  /** Wall clock, ms. */
  readonly now?: () => number;
}

/** The uplink as `/status.json` carries it. */
export interface UplinkFields {
  readonly up: boolean;
  /** When it last went up or down (ms since the epoch). */
  readonly since_ms: number;
  /** Why it is down ("" while up). */
  readonly reason: string;
  readonly waiting_messages: number;
  readonly waiting_bytes: number;
  /** Age of the oldest waiting message, seconds (0 when none waits). */
  readonly oldest_age_s: number;
  /** Messages confirmed upstream per second over the last sample interval. */
  readonly drain_rate: number;
  /** The backlog that waited through the last outage is still being sent. */
  readonly draining: boolean;
}

const NOTHING: UplinkBacklog = { messages: 0, bytes: 0, oldestMicros: null };

/** One uplink's state: up or down, since when, why, and the drain after an outage. */
export class Uplink {
  readonly #src: UplinkSource;
  readonly #logger: Logger;
  readonly #now: () => number;
  /** A time `#now` gave earlier, moved by the wall clock's forward steps since (durations). */
  readonly #corrected: (ms: number) => number;
  /** null until the first connection or the first failure. */
  #up: boolean | null = null;
  #since: number;
  #reason = "not connected yet";
  /** The outage that ended and whose backlog is being sent; undefined otherwise. */
  #drain: { downMs: number; waited: UplinkBacklog; upAt: number; target: number } | undefined;
  #downAt = 0;
  #waitedAtDown: UplinkBacklog = NOTHING;
  #rate = 0;
  #lastSample: { at: number; forwarded: number } | undefined;

  constructor(source: UplinkSource, logger: Logger) {
    this.#src = source;
    this.#logger = logger;
    this.#now = source.now ?? (() => wallClock.now());
    this.#corrected = source.now ? (ms) => ms : (ms) => wallClock.corrected(ms);
    this.#since = this.#now();
  }

  /** Whether the uplink is up now (false before the first connection). */
  get up(): boolean {
    return this.#up === true;
  }

  /** Why it is down, or "" while up. */
  get reason(): string {
    return this.#up === true ? "" : this.#reason;
  }

  /**
   * The uplink is lost (or could not be reached): the first report of an outage logs
   * `Uplink down`; later ones only keep the newest reason.
   */
  down(reason: string): void {
    this.#reason = reason;
    if (this.#up === false) return;
    const now = this.#now();
    if (this.#drain) this.#logUp(now, false); // an outage cut the drain of the one before
    this.#up = false;
    this.#since = this.#downAt = now;
    const waited = this.#waitedAtDown = this.#backlog();
    this.#logger.warn("Uplink down", {
      uplink: this.#src.name,
      reason,
      waiting_messages: waited.messages,
      waiting_bytes: waited.bytes,
    });
  }

  /**
   * The uplink answered: the first report after an outage starts the drain of what waited
   * (`Uplink up` is logged once it is sent); the first connection ever is logged on its own.
   * Cheap when already up (one comparison): lanes call it after each confirmed send.
   */
  reached(detail = ""): void {
    if (this.#up === true) return;
    const now = this.#now();
    const first = this.#up === null;
    this.#up = true;
    this.#since = now;
    if (first) {
      this.#logger.info("Uplink connected", { uplink: this.#src.name, detail });
      return;
    }
    // Without a count of what went upstream (Iggy mode) the outage ends here, with no drain.
    const waiting = this.#src.forwarded ? this.#backlog() : NOTHING;
    this.#drain = {
      downMs: now - this.#corrected(this.#downAt),
      waited: waiting,
      upAt: now,
      target: (this.#src.forwarded?.() ?? 0) + waiting.messages,
    };
    this.sample(now);
  }

  /**
   * Measures the drain rate and ends a drain whose backlog is sent; its owner calls it about
   * once a second (and it runs on every report of the uplink coming back).
   */
  sample(now: number = this.#now()): void {
    const forwarded = this.#src.forwarded?.() ?? 0;
    const last = this.#lastSample;
    if (last && now > last.at) this.#rate = (forwarded - last.forwarded) * 1000 / (now - last.at);
    this.#lastSample = { at: now, forwarded };
    const drain = this.#drain;
    if (drain && (forwarded >= drain.target || this.#backlog().messages === 0)) {
      this.#logUp(now, true);
    }
  }

  /** The fields of `/status.json`. */
  fields(now: number = this.#now()): UplinkFields {
    const b = this.#backlog();
    return {
      up: this.#up === true,
      since_ms: this.#since,
      reason: this.reason,
      waiting_messages: b.messages,
      waiting_bytes: b.bytes,
      oldest_age_s: b.oldestMicros === null ? 0 : Math.max(0, now / 1000 - b.oldestMicros / 1e6),
      drain_rate: Math.round(this.#rate * 10) / 10,
      draining: this.#drain !== undefined,
    };
  }

  #logUp(now: number, drained: boolean): void {
    const d = this.#drain!;
    this.#drain = undefined;
    const fields = {
      uplink: this.#src.name,
      down_ms: d.downMs,
      waited_messages: d.waited.messages,
      waited_bytes: d.waited.bytes,
      drain_ms: now - this.#corrected(d.upAt),
      ...(drained ? {} : { drained: false }),
    };
    this.#logger.info("Uplink up", fields);
  }

  #backlog(): UplinkBacklog {
    return this.#src.backlog?.() ?? NOTHING;
  }
}
