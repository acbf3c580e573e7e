/**
 * When a stored session ends, and what it leaves behind. A session's expiry is read from the
 * settings as they are now, not as they were when it was stored: an MQTT 3.1.1 session has no
 * interval of its own (it took `session.expiry_s`), so the setting is its expiry; an MQTT 5
 * session keeps the interval it was granted, capped by `session.max_expiry_s`. Lowering either
 * setting and restarting thus expires the sessions stored before.
 *
 * A removed session's positions (consumer offsets under its consumer name, one per triple it
 * knew) are deleted from the log when the log can delete them (`LogBackend.deleteOffset`), a
 * bounded number at a time, so that a fleet that makes a new client id per boot does not grow
 * the catalog without end. A client id that gets a stored session again before its turn keeps
 * its rows (the new session writes over those it uses); a deletion under way when the id
 * returns was sent before its CONNACK, so before any position the new session stores.
 *
 * @module
 */
import { type WallClock, wallClock } from "../base/wall_clock.ts";
import { type LogBackend, type PartitionAddress, partitionOfKey } from "../log/port.ts";
import type { Logger } from "../observe/logger.ts";
import { utf8Length } from "../base/utf8.ts";
import { xxh3_64 } from "../base/xxhash.ts";

const CONSUMER_PREFIX = "mqtt-session-";

/** The consumer name under which a client's positions are stored (≤ 255 bytes, as Iggy's). */
export function sessionConsumer(clientId: string): string {
  const name = CONSUMER_PREFIX + clientId;
  if (utf8Length(name) <= 255) return name;
  const hash = xxh3_64(new TextEncoder().encode(clientId)).toString(16);
  return `${CONSUMER_PREFIX}h-${hash}`;
}

/** The settings a session's expiry is read from (s). */
export interface ExpiryRules {
  /** `session.expiry_s`: the expiry of every MQTT 3.1.1 session. */
  readonly expiryS: number;
  /** `session.max_expiry_s`: the cap on every MQTT 5 session's own interval. */
  readonly maxExpiryS5: number;
  /** The wall clock sessions are timed by (ms); default the process's `wallClock`. */
  readonly clock?: Pick<WallClock, "now" | "corrected">;
}

/**
 * Ms actually passed from the wall time `ms` (recorded earlier, in this run or a past one) to
 * `now`: `ms` is moved by the clock's forward steps since, so a step does not age a session.
 */
export function msSince(ms: number, now: number, rules: ExpiryRules): number {
  return now - clockOf(rules).corrected(ms);
}

/** The clock `rules` time sessions by. */
export function clockOf(rules: ExpiryRules): Pick<WallClock, "now" | "corrected"> {
  return rules.clock ?? wallClock;
}

/** The part of a session its expiry depends on. */
export interface ExpiringSession {
  readonly expiryS: number;
  readonly mqtt5?: boolean;
}

/** Seconds offline after which `s` is removed, under the rules as they are now. */
export function expiryOf(s: ExpiringSession, rules: ExpiryRules): number {
  return s.mqtt5 === true ? Math.min(s.expiryS, rules.maxExpiryS5) : rules.expiryS;
}

/** Whether `s` is offline (since `offlineSinceMs`) and has been for its expiry, as of `now`. */
export function expiredAt(
  s: ExpiringSession & { readonly offlineSinceMs: number | null },
  now: number,
  rules: ExpiryRules,
): boolean {
  return s.offlineSinceMs !== null &&
    msSince(s.offlineSinceMs, now, rules) >= expiryOf(s, rules) * 1000;
}

/** Deletions of positions in flight at once (Iggy: one request each). */
const FORGET_AT_ONCE = 32;

/** The partition a stored triple key names (`partitionKey`), or null for a malformed one. */
function addressOfKey(key: string): PartitionAddress | null {
  const a = partitionOfKey(key);
  return a.topic === undefined || !Number.isInteger(a.partition) ? null : a;
}

/** Deletes removed sessions' consumer offsets, a few at a time, after their tombstones. */
export class PositionForgetter {
  readonly #backend: LogBackend;
  readonly #logger: Logger;
  /** Client id → its consumer name and triple keys, waiting for their turn. */
  readonly #queue = new Map<string, { consumer: string; keys: string[] }>();
  readonly #inFlight = new Map<string, Promise<void>>();
  #run: Promise<void> | null = null;
  #deleted = 0;
  #stopped = false;

  constructor(backend: LogBackend, logger: Logger) {
    this.#backend = backend;
    this.#logger = logger;
  }

  /** Consumer-offset deletions answered since start (a row already absent counts too). */
  get deleted(): number {
    return this.#deleted;
  }

  /** Whether the log can delete consumer offsets at all. */
  get able(): boolean {
    return this.#backend.deleteOffset !== undefined;
  }

  /** Queues the deletion of `consumer`'s offsets on the triples `keys` (`clientId` removed). */
  forget(clientId: string, consumer: string, keys: Iterable<string>): void {
    if (!this.able || this.#stopped) return;
    const list = [...keys];
    if (list.length === 0) return;
    this.#queue.set(clientId, { consumer, keys: list });
    this.#run ??= this.#drain().finally(() => {
      this.#run = null;
    });
  }

  /** `clientId` has a stored session again: its queued deletion is dropped. */
  cancel(clientId: string): void {
    this.#queue.delete(clientId);
  }

  /** Resolves once a deletion under way for `clientId` (if any) has been answered. */
  settled(clientId: string): Promise<void> {
    return this.#inFlight.get(clientId) ?? Promise.resolve();
  }

  /**
   * The gateway stops: what is queued is dropped (its rows stay), what is under way is waited
   * for, so that a log that does not answer cannot hold the stop for a queue's worth of timeouts.
   */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#queue.clear();
    await this.idle();
  }

  /** Resolves when nothing is queued or in flight. */
  async idle(): Promise<void> {
    while (this.#run !== null) await this.#run;
  }

  async #drain(): Promise<void> {
    while (this.#queue.size > 0) {
      const batch: [string, { consumer: string; keys: string[] }][] = [];
      for (const entry of this.#queue) {
        batch.push(entry);
        if (batch.length === FORGET_AT_ONCE) break;
      }
      for (const [id] of batch) this.#queue.delete(id);
      await Promise.all(batch.map(([id, { consumer, keys }]) => {
        const done = this.#forgetOne(id, consumer, keys).finally(() => this.#inFlight.delete(id));
        this.#inFlight.set(id, done);
        return done;
      }));
    }
  }

  async #forgetOne(clientId: string, consumer: string, keys: string[]): Promise<void> {
    for (const key of keys) {
      const address = addressOfKey(key);
      if (address === null) continue;
      try {
        await this.#backend.deleteOffset!(consumer, address);
        this.#deleted++;
      } catch (err) {
        this.#logger.limited("warn", "Deleting an expired session's position failed", {
          client_id: clientId,
          stream: address.stream,
          topic: address.topic,
          partition: address.partition,
          error: err,
        });
      }
    }
  }
}

/**
 * Load: the tombstones read of sessions whose earlier records were read. Their positions may
 * still be stored (the gateway stopped before deleting them, or the compaction that keeps a
 * tombstone until then had not run): they are deleted once the read is done, unless the id was
 * stored again after its tombstone. Deleting an absent row is harmless.
 */
export class TombstonesRead {
  readonly #gone = new Map<string, { consumer: string; keys: Set<string> }>();

  /** `clientId`'s tombstone was read; its session knew the triples `keys`. */
  note(clientId: string, consumer: string, keys: Iterable<string>): void {
    const known = this.#gone.get(clientId)?.keys ?? new Set<string>();
    for (const k of keys) known.add(k);
    this.#gone.set(clientId, { consumer, keys: known });
  }

  /** A record of `clientId` after its tombstone: it is stored again. */
  stored(clientId: string): void {
    this.#gone.delete(clientId);
  }

  /** Queues the deletions of those not `storedNow`. */
  forget(forgetter: PositionForgetter, storedNow: (clientId: string) => boolean): void {
    for (const [id, { consumer, keys }] of this.#gone) {
      if (!storedNow(id)) forgetter.forget(id, consumer, keys);
    }
    this.#gone.clear();
  }
}
