/**
 * The stored sessions that are offline, oldest disconnect first: the ones
 * `limits.max_stored_sessions` evicts first. A Map keeps insertion order, so going offline
 * (again) moves a session to the end and the first entry is always the longest offline; every
 * step is O(1), a CONNECT at the bound does not scan the stored sessions.
 *
 * @module
 */
import type { Logger } from "../observe/logger.ts";
import type { StoredSession } from "./session_state.ts";

/** Offline sessions by client id, in the order they went offline. */
export class OfflineOrder {
  readonly #order = new Map<string, StoredSession>();

  /** `s` went offline now (or was loaded offline: load them in order of `offlineSinceMs`). */
  offline(s: StoredSession): void {
    this.#order.delete(s.clientId);
    this.#order.set(s.clientId, s);
  }

  /**
   * The sessions read at a start: every one is offline (one recorded as connected since the
   * stop, `nowMs`), in the order of their disconnects.
   */
  loaded(sessions: Iterable<StoredSession>, nowMs: number): void {
    const all = [...sessions];
    for (const s of all) s.offlineSinceMs ??= nowMs;
    all.sort((a, b) => a.offlineSinceMs! - b.offlineSinceMs!);
    for (const s of all) this.offline(s);
  }

  /** `clientId` is connected again, or no longer stored. */
  drop(clientId: string): void {
    this.#order.delete(clientId);
  }

  /** The session offline the longest, if any is offline. */
  oldest(): StoredSession | undefined {
    for (const s of this.#order.values()) return s;
    return undefined;
  }

  /** Sessions offline now. */
  get size(): number {
    return this.#order.size;
  }
}

/**
 * Evicts the sessions offline the longest while `over()` says the store is over its bound
 * (`max`), or until none is offline: `evict` removes each; each is logged (rate-limited: the
 * first of a burst names its client id, the rest are counted in the line after).
 */
export function evictOldest(
  order: OfflineOrder,
  over: () => boolean,
  evict: (s: StoredSession) => void,
  logger: Logger,
  max: number,
  nowMs: number,
): void {
  while (over()) {
    const s = order.oldest();
    if (s === undefined) return;
    order.drop(s.clientId);
    evict(s);
    logger.limited("warn", "Stored session evicted: max_stored_sessions reached", {
      client_id: s.clientId,
      offline_s: Math.round((nowMs - (s.offlineSinceMs ?? nowMs)) / 1000),
      max_stored_sessions: max,
    });
  }
}
