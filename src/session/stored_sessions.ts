/**
 * Stored sessions: a stored session is a stored position in the log. Its subscriptions live in
 * the log itself, one record per change in a topic of their own
 * (`session.store_stream` / `session.store_topic`, the latest record of a client id wins), and its
 * per-triple positions are consumer offsets under the client's own consumer name
 * ({@link sessionConsumer}), so both survive a disconnect and a gateway restart and are shared by
 * every gateway on the same log. The gateway keeps no database of its own.
 *
 * Bounds: at most `limits.max_stored_sessions` (a new one beyond → CONNACK 3, logged); a session
 * is removed after its expiry offline, read from the settings as they are now
 * (`session_expiry.ts`), and its positions are then deleted from the log; the record topic is
 * created with a retention of twice the longest expiry, and records of connected sessions are
 * written again before half of it has passed.
 *
 * @module
 */
import { utf8Length } from "../base/utf8.ts";
import { xxh3_64 } from "../base/xxhash.ts";
import { coalesced } from "../base/coalesced.ts";
import type { LogBackend, PartitionAddress, StoredMessage } from "../log/port.ts";
import { readToEnd } from "../log/read_to_end.ts";
import type { Logger } from "../observe/logger.ts";
import {
  parseSessionRecord,
  SESSION_TOMBSTONE,
  sessionRecordOf,
  type StoredSession,
} from "./session_record.ts";
import { expiryOf, type ExpiryRules, PositionForgetter } from "./session_expiry.ts";

/** Header naming the client id of a session record. */
export const H_SESSION = "mqtt.session";
/** Header naming the process that wrote a record: its own records never overwrite its memory. */
const H_WRITER = "mqtt.session_writer";
const CONSUMER_PREFIX = "mqtt-session-";
const LOAD_BATCH = 1000;

/** The session a CONNECT asks for. */
export interface SessionRequest {
  /** Keep subscriptions and positions after the connection ends. */
  readonly store: boolean;
  /** A session stored before under this client id is discarded first [MQTT-3.1.2-6]. */
  readonly cleanStart: boolean;
  /** Seconds offline after which the stored session is removed (MQTT 5: the granted interval). */
  readonly expiryS: number;
  /** MQTT 5: `expiryS` is the session's own; else its expiry is `session.expiry_s` as it is now. */
  readonly mqtt5?: boolean;
  /**
   * Only an existing stored session is resumed; without one the session is clean (no record,
   * no `max_stored_sessions` slot): MQTT 5 Clean Start 0 with expiry 0.
   */
  readonly resumeOnly?: boolean;
}

/** One stored session, kept in memory while the gateway runs (`session_record.ts`). */
export type { StoredSession } from "./session_record.ts";

/** Options of the store; `expiryS` and `maxExpiryS5` apply to every session, whenever stored. */
export interface StoredSessionOptions extends ExpiryRules {
  readonly stream: string;
  readonly topic: string;
  readonly maxSessions: number;
  /** The longest expiry a session may have (the record topic's retention is twice it). */
  readonly maxExpiryS: number;
  /** Wall clock, ms since the epoch (expiry counts across restarts). */
  readonly now?: () => number;
  /** How often expired sessions are looked for (ms). */
  readonly sweepIntervalMs: number;
  /** Called with the number of sessions each sweep removed. */
  readonly onExpired?: (count: number) => void;
}

/** The consumer name under which a client's positions are stored (≤ 255 bytes, as Iggy's). */
export function sessionConsumer(clientId: string): string {
  const name = CONSUMER_PREFIX + clientId;
  if (utf8Length(name) <= 255) return name;
  const hash = xxh3_64(new TextEncoder().encode(clientId)).toString(16);
  return `${CONSUMER_PREFIX}h-${hash}`;
}

/** The stored sessions of the gateway. */
export class StoredSessions {
  #backend: LogBackend;
  #opts: StoredSessionOptions;
  #logger: Logger;
  #now: () => number;
  #sessions = new Map<string, StoredSession>();
  #address: PartitionAddress;
  /** Next record offset to read (records other gateways wrote are read before a resume). */
  #readFrom = 0;
  #malformed = 0;
  /** Sessions whose client is connected to this gateway (only these are renewed here). */
  #attached = new WeakSet<StoredSession>();
  #loaded = false;
  #pending = new Set<Promise<void>>();
  /** This process's writer id (records it wrote are older than its memory). */
  #writer = crypto.randomUUID();
  #timer: ReturnType<typeof setInterval> | undefined;
  /** Removed sessions' positions, deleted from the log after their tombstones. */
  readonly forgetter: PositionForgetter;

  constructor(backend: LogBackend, opts: StoredSessionOptions, logger: Logger) {
    this.#backend = backend;
    this.#opts = opts;
    this.#logger = logger;
    this.forgetter = new PositionForgetter(backend, logger);
    this.#now = opts.now ?? Date.now;
    this.#address = { stream: opts.stream, topic: opts.topic, partition: 0 };
  }

  /** Stored sessions now (connected and offline). */
  get size(): number {
    return this.#sessions.size;
  }

  /** The stored sessions (connected or not) subscribed to `filter`, e.g. a `$share/…` one. */
  subscribedTo(filter: string): StoredSession[] {
    const out: StoredSession[] = [];
    for (const s of this.#sessions.values()) if (s.subscriptions.has(filter)) out.push(s);
    return out;
  }

  /** The session of a client id, if one is stored. */
  get(clientId: string): StoredSession | undefined {
    return this.#sessions.get(clientId);
  }

  /** Every stored session, connected or not (the admin listing). */
  list(): StoredSession[] {
    return [...this.#sessions.values()];
  }

  /**
   * Creates the record topic when missing and reads every record. Resolves false (logged) when
   * the log cannot answer: stored sessions are then refused (CONNACK 3) until a later
   * {@link sync} succeeds.
   */
  async load(): Promise<boolean> {
    try {
      const { stream, topic } = this.#opts;
      if (await this.#backend.getTopic(stream, topic) === null) {
        await this.#backend.createTopic(stream, topic, {
          partitions: 1,
          messageExpiryMicros: 2 * this.#opts.maxExpiryS * 1_000_000,
          durable: true,
        });
      }
      this.#loaded = true;
      await this.#readTail();
      const now = this.#now();
      for (const s of this.#sessions.values()) s.offlineSinceMs ??= now; // gateway was down
      this.sweep();
      return true;
    } catch (err) {
      this.#loaded = false;
      this.#logger.warn("Stored sessions unavailable", { error: err });
      return false;
    }
  }

  /**
   * Reads records written since the last read (another gateway's); false when unavailable.
   * One read at a time ({@link coalesced}): a read per CONNECT decodes the same tail once per
   * concurrent CONNECT — garbage per stored session in a burst, which grows the heap and the
   * allocator for good (see docs/BENCHMARKS.md, 'Figures behind the code') — and two reads at
   * once could apply an older record after a newer one.
   */
  readonly sync: () => Promise<boolean> = coalesced(() => this.#syncOnce());

  async #syncOnce(): Promise<boolean> {
    if (!this.#loaded) return await this.load();
    try {
      await this.#readTail();
      return true;
    } catch (err) {
      this.#logger.limited("warn", "Reading stored sessions failed", { error: err });
      return false;
    }
  }

  /**
   * The owner of the stored session under `clientId` ("" anonymous), undefined when that
   * session was recorded before owners, null when none is stored (or it has expired).
   */
  ownerOf(clientId: string): string | undefined | null {
    const s = this.#sessions.get(clientId);
    if (s === undefined || this.#expired(s, this.#now())) return null;
    return s.owner;
  }

  /** Whether a new stored session would pass `limits.max_stored_sessions`. */
  full(clientId: string): boolean {
    return !this.#sessions.has(clientId) && this.#sessions.size >= this.#opts.maxSessions;
  }

  /**
   * A CONNECT was accepted: a clean start discards the stored session [MQTT-3.1.2-6]; a stored
   * session is resumed (present) or created. Returns the session (null: clean) and whether
   * one was present.
   */
  open(
    clientId: string,
    req: SessionRequest,
    owner: string,
  ): { session: StoredSession | null; present: boolean } {
    let s = this.#sessions.get(clientId);
    if (s !== undefined && (req.cleanStart || this.#expired(s, this.#now()))) {
      this.remove(clientId);
      s = undefined;
    }
    if (!req.store || (req.resumeOnly && s === undefined)) return { session: null, present: false };
    const present = s !== undefined;
    if (s === undefined) this.forgetter.cancel(clientId); // its old rows are written over
    s ??= blankSession(clientId, req.expiryS);
    s.expiryS = req.expiryS;
    s.mqtt5 = req.mqtt5 === true;
    s.offlineSinceMs = null;
    s.owner = owner;
    this.#sessions.set(clientId, s);
    this.#attached.add(s);
    this.save(s);
    return { session: s, present };
  }

  /** The client went offline: its expiry starts now. */
  offline(s: StoredSession): void {
    if (this.#sessions.get(s.clientId) !== s) return; // discarded or taken over meanwhile
    this.#attached.delete(s);
    s.offlineSinceMs = this.#now();
    this.save(s);
  }

  /**
   * Removes a stored session: its record is superseded by a tombstone, and its positions are
   * deleted from the log after it (unless the id gets a stored session again first).
   */
  remove(clientId: string): void {
    const s = this.#sessions.get(clientId);
    if (s === undefined) return;
    this.#sessions.delete(clientId);
    const consumer = sessionConsumer(clientId);
    // Only after the tombstone (a session whose tombstone failed comes back at a restart), and
    // only while the id has no stored session again (that one writes over the rows it uses).
    const then = this.#write(clientId, SESSION_TOMBSTONE).then((stored) => {
      if (stored && !this.#sessions.has(clientId)) {
        this.forgetter.forget(clientId, consumer, s.triples);
      }
    });
    this.#pending.add(then);
    then.finally(() => this.#pending.delete(then));
  }

  /** Writes the session's record (its subscriptions, triples, expiry, offline time). */
  save(s: StoredSession): void {
    if (this.#sessions.get(s.clientId) !== s) return;
    s.savedAtMs = this.#now();
    this.#write(s.clientId, sessionRecordOf(s));
  }

  /**
   * Removes sessions offline longer than their expiry, and writes again the records of connected
   * ones older than half the record topic's retention. Returns how many expired.
   */
  sweep(): number {
    const now = this.#now();
    let expired = 0;
    for (const s of [...this.#sessions.values()]) {
      if (this.#expired(s, now)) {
        this.remove(s.clientId);
        expired++;
      } else if (s.offlineSinceMs === null && now - s.savedAtMs > this.#opts.maxExpiryS * 1000) {
        // Only a session attached here is kept alive; a remote gateway's "connected" record
        // that its gateway stopped renewing (gone without a word) counts as offline since.
        if (this.#attached.has(s)) this.save(s);
        else if (now - s.savedAtMs > 2 * this.#opts.maxExpiryS * 1000) {
          s.offlineSinceMs = s.savedAtMs;
          if (this.#expired(s, now)) {
            this.remove(s.clientId);
            expired++;
          }
        }
      }
    }
    if (expired > 0) {
      this.#logger.info("Stored sessions expired", { count: expired });
      this.#opts.onExpired?.(expired);
    }
    return expired;
  }

  /** Starts the expiry sweeps (one timer for every session). */
  start(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setInterval(() => this.sweep(), this.#opts.sweepIntervalMs);
    Deno.unrefTimer(this.#timer as unknown as number);
  }

  /** Ends the sweeps and waits for the record writes in flight. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.idle();
    await this.forgetter.stop();
  }

  /** Resolves when every record write so far, and the deletions after them, are answered. */
  async idle(): Promise<void> {
    while (this.#pending.size > 0) await Promise.all([...this.#pending]);
    await this.forgetter.idle();
  }

  /** Seconds offline after which `s` is removed, under the settings now. */
  expiryOf(s: StoredSession): number {
    return expiryOf(s, this.#opts);
  }

  #expired(s: StoredSession, now: number): boolean {
    return s.offlineSinceMs !== null && now - s.offlineSinceMs >= this.expiryOf(s) * 1000;
  }

  /** Appends a record; resolves true once it is stored, false when that failed (logged). */
  #write(clientId: string, record: unknown): Promise<boolean> {
    const message = {
      payload: new TextEncoder().encode(JSON.stringify(record)),
      headers: new Map([[H_SESSION, clientId], [H_WRITER, this.#writer]]),
    };
    const p = this.#backend.append({ ...this.#address, messages: [message] }).then(
      () => true,
      (err) => {
        this.#logger.limited("warn", "Writing a stored session failed", {
          client_id: clientId,
          error: err,
        });
        return false;
      },
    );
    const settled = p.then(() => {}).finally(() => this.#pending.delete(settled));
    this.#pending.add(settled);
    return p;
  }

  /** Records skipped as malformed since start (a foreign or damaged record). */
  get malformed(): number {
    return this.#malformed;
  }

  async #readTail(): Promise<void> {
    // Each record read moves #readFrom on at once: a failed poll resumes after it.
    await readToEnd(this.#backend, this.#address, this.#readFrom, LOAD_BATCH, (m) => {
      // One bad record must not stop the reading: it would be read (and fail) forever.
      try {
        this.#apply(m);
      } catch (err) {
        this.#skipMalformed(m, err);
      }
      this.#readFrom = m.offset + 1;
    });
  }

  #skipMalformed(m: StoredMessage, err?: unknown): void {
    this.#malformed++;
    this.#logger.limited("warn", "Skipping a malformed stored-session record", {
      offset: m.offset,
      ...(err === undefined ? {} : { error: err }),
    });
  }

  /** One record: the latest of a client id wins; a malformed one is skipped (logged). */
  #apply(m: StoredMessage): void {
    const clientId = m.headers.get(H_SESSION);
    if (clientId === undefined || m.headers.get(H_WRITER) === this.#writer) return;
    const r = parseSessionRecord(new TextDecoder().decode(m.payload));
    if (r.kind === "deleted") {
      this.#sessions.delete(clientId);
      return;
    }
    if (r.kind === "malformed") return this.#skipMalformed(m);
    const known = this.#sessions.get(clientId);
    if (known === undefined && this.#sessions.size >= this.#opts.maxSessions) {
      this.#logger.limited("warn", "Stored session not loaded: max_stored_sessions reached", {
        client_id: clientId,
      });
      return;
    }
    const s = known ?? blankSession(clientId, 0);
    r.apply(s, this.#opts.maxExpiryS);
    s.savedAtMs = Math.floor(m.timestampMicros / 1000);
    this.#sessions.set(clientId, s);
  }
}

/** A session with nothing subscribed yet, connected (never saved). */
function blankSession(clientId: string, expiryS: number): StoredSession {
  const never = { offlineSinceMs: null, savedAtMs: 0 };
  return { clientId, subscriptions: new Map(), triples: new Set(), expiryS, ...never };
}
