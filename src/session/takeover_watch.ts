/**
 * Client ids taken over again and again: two devices that share a client id close each other's
 * connection in turn [MQTT-3.1.4-2], each reconnecting at once, and neither gets much through.
 * One takeover is ordinary (a device reconnecting before the gateway saw its old connection
 * die); {@link TAKEOVER_REPEATS} of one id within {@link TAKEOVER_WINDOW_MS} are not. The id is
 * then named in a warn line with both peers' addresses, once per window per id, and the lines
 * are rate-limited like every repeated line (`Logger.limited`).
 *
 * Bounded: at most {@link MAX_WATCHED_IDS} ids are counted per window; ids past that wait for
 * the next window (every takeover still counts in `mqtt_session_takeovers_total`).
 *
 * @module
 */
import type { Logger } from "../observe/logger.ts";

/** Takeovers of one id within a window that make it "again and again". */
export const TAKEOVER_REPEATS = 3;
/** The window the takeovers of an id are counted in (ms). */
export const TAKEOVER_WINDOW_MS = 60_000;
/** Most ids counted per window. */
export const MAX_WATCHED_IDS = 10_000;

/** Counts takeovers per client id and warns about ids taken over again and again. */
export class TakeoverWatch {
  readonly #logger: Logger;
  readonly #now: () => number;
  #windowStart: number;
  readonly #counts = new Map<string, number>();

  constructor(logger: Logger, now: () => number = () => performance.now()) {
    this.#logger = logger;
    this.#now = now;
    this.#windowStart = now();
  }

  /** `clientId` was taken over: its connection from `oldPeer` closed for one from `newPeer`. */
  noted(clientId: string, oldPeer: string | undefined, newPeer: string | undefined): void {
    const now = this.#now();
    if (now - this.#windowStart >= TAKEOVER_WINDOW_MS) {
      this.#counts.clear();
      this.#windowStart = now;
    }
    const known = this.#counts.get(clientId);
    if (known === undefined && this.#counts.size >= MAX_WATCHED_IDS) return;
    const count = (known ?? 0) + 1;
    this.#counts.set(clientId, count);
    if (count !== TAKEOVER_REPEATS) return;
    this.#logger.limited("warn", "Client id taken over again and again: two clients share it?", {
      client_id: clientId,
      takeovers: count,
      window_s: TAKEOVER_WINDOW_MS / 1000,
      previous_peer: oldPeer ?? "unknown",
      new_peer: newPeer ?? "unknown",
    });
  }
}
