/**
 * Stored sessions: a stored session is a stored position in the log. Its subscriptions live in a
 * record topic of their own (`session.store_stream` / `session.store_topic`, the latest record of a
 * client id wins) and its per-triple positions are consumer offsets under the client's own consumer
 * name ({@link sessionConsumer}): both survive a restart and are shared by every gateway on the
 * same log. At most `limits.max_stored_sessions` (a new one evicts the session offline the longest,
 * `offline_order.ts`; refused only when all are connected); a session is removed after its expiry
 * offline under the settings as they are now (`session_expiry.ts`), its positions then deleted. On
 * the embedded log the record topic is compacted instead of aged (`session_compaction.ts`); on
 * Iggy it keeps twice the longest expiry and live records are written again before half of it.
 *
 * @module
 */
import { coalesced } from "../base/coalesced.ts";
import type { LogBackend, PartitionAddress, StoredMessage } from "../log/port.ts";
import type { Logger } from "../observe/logger.ts";
import { type ParsedRecord, SESSION_TOMBSTONE, sessionRecordOf } from "../stored/session_record.ts";
import { copyOf, newSession, type StoredSession } from "./session_state.ts";
import { clockOf, expiredAt, expiryOf, type ExpiryRules, msSince } from "./session_expiry.ts";
import { PositionForgetter, sessionConsumer, TombstonesRead } from "./session_expiry.ts";
import { openRecordTopic, RecordCompactor } from "./session_compaction.ts";
import { evictOldest, OfflineOrder } from "./offline_order.ts";
import type { SessionRequest } from "./requested_session.ts";
import { SessionRecordLog } from "./session_record_log.ts";

/** One stored session, kept in memory while the gateway runs (`session_state.ts`). */
export type { StoredSession } from "./session_state.ts";
export { sessionConsumer } from "./session_expiry.ts";

/** Options of the store; `expiryS` and `maxExpiryS5` apply to every session, whenever stored. */
export interface StoredSessionOptions extends ExpiryRules {
  readonly stream: string;
  readonly topic: string;
  readonly maxSessions: number;
  /** The longest expiry a session may have (the record topic's retention is twice it). */
  readonly maxExpiryS: number;
  /** Wall clock, ms since the epoch (expiry counts across restarts); default `clock`'s. */
  readonly now?: () => number;
  /** How often expired sessions are looked for (ms). */
  readonly sweepIntervalMs: number;
  /** Called with the number of sessions each sweep removed. */
  readonly onExpired?: (count: number) => void;
  /** Called once per session evicted at `max_stored_sessions`. */
  readonly onEvicted?: () => void;
  /** The longest a record waits before compaction restates it (ms; `session_compaction.ts`). */
  readonly compactAfterMs?: number;
}

/** The stored sessions of the gateway. */
export class StoredSessions {
  #backend: LogBackend;
  #opts: StoredSessionOptions;
  #logger: Logger;
  #now: () => number;
  #sessions = new Map<string, StoredSession>();
  #address: PartitionAddress;
  /** Sessions whose client is connected to this gateway (only these are renewed here). */
  #attached = new WeakSet<StoredSession>();
  #loaded = false;
  #pending = new Set<Promise<void>>();
  #timer: ReturnType<typeof setInterval> | undefined;
  /** Removed sessions' positions, deleted from the log after their tombstones. */
  readonly forgetter: PositionForgetter;
  /** Rewrites the live records at the head and drops the older ones (embedded). */
  readonly compactor: RecordCompactor;
  readonly #offline = new OfflineOrder();
  readonly #records: SessionRecordLog;
  /** The record topic's own retention by age (ms; 0: none known). */
  #retentionMs = 0;
  /** Load: tombstones read, whose positions are deleted once the read is done. */
  #tombstoned: TombstonesRead | null = null;

  constructor(backend: LogBackend, opts: StoredSessionOptions, logger: Logger) {
    this.#backend = backend;
    // A test's own `now` is another timeline than the process clock's steps.
    this.#opts = opts.now && !opts.clock
      ? { ...opts, clock: { now: opts.now, corrected: (t) => t } }
      : opts;
    this.#logger = logger;
    this.forgetter = new PositionForgetter(backend, logger);
    this.#now = opts.now ?? (() => clockOf(opts).now());
    this.#address = { stream: opts.stream, topic: opts.topic, partition: 0 };
    this.#records = new SessionRecordLog(backend, this.#address, logger);
    const at = this.#address;
    this.compactor = new RecordCompactor(backend, at, logger, this.#now, opts.compactAfterMs);
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
      const { maxExpiryS } = this.#opts;
      this.#retentionMs = await openRecordTopic(this.#backend, this.#address, maxExpiryS);
      this.#loaded = true;
      this.#tombstoned = new TombstonesRead();
      await this.#readTail();
      this.#tombstoned.forget(this.forgetter, (id) => this.#sessions.has(id));
      this.#tombstoned = null;
      this.#offline.loaded(this.#sessions.values(), this.#now());
      this.sweep();
      return true;
    } catch (err) {
      this.#loaded = false;
      this.#tombstoned = null;
      // Rate-limited: Iggy mode retries with every read for claims (`session_claims.ts`).
      this.#logger.limited("warn", "Stored sessions unavailable", { error: err });
      return false;
    }
  }

  /**
   * Reads records written since the last read (another gateway's); false when unavailable.
   * One read at a time ({@link coalesced}): concurrent CONNECTs would each decode the same tail
   * (garbage per stored session that grows the heap for good), and two reads at once could apply
   * an older record after a newer one.
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
    if (s === undefined || expiredAt(s, this.#now(), this.#opts)) return null;
    return s.owner;
  }

  /**
   * Whether a new stored session would pass `limits.max_stored_sessions` with no offline
   * session to evict for it (every stored session connected).
   */
  full(clientId: string): boolean {
    return !this.#sessions.has(clientId) && this.#sessions.size >= this.#opts.maxSessions &&
      (this.#offline.size === 0 || this.#opts.maxSessions === 0);
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
    if (s !== undefined && (req.cleanStart || expiredAt(s, this.#now(), this.#opts))) {
      this.remove(clientId);
      s = undefined;
    }
    if (!req.store || (req.resumeOnly && s === undefined)) return { session: null, present: false };
    const present = s !== undefined;
    if (s === undefined) {
      this.forgetter.cancel(clientId); // its old rows are written over
      this.#evictFor(1);
    }
    s ??= newSession(clientId);
    s.expiryS = req.expiryS;
    s.mqtt5 = req.mqtt5 === true;
    s.offlineSinceMs = null;
    s.owner = owner;
    this.#sessions.set(clientId, s);
    this.#offline.drop(clientId);
    this.#attached.add(s);
    this.save(s);
    return { session: s, present };
  }

  /** Another gateway took the client over: its connection here ends without an offline record. */
  handedOver(clientId: string): void {
    const s = this.#sessions.get(clientId);
    if (s !== undefined) this.#sessions.set(clientId, copyOf(s, this.#opts.maxExpiryS));
  }

  /** The client went offline: its expiry starts now. */
  offline(s: StoredSession): void {
    if (this.#sessions.get(s.clientId) !== s) return; // discarded or taken over meanwhile
    this.#attached.delete(s);
    s.offlineSinceMs = this.#now();
    this.#offline.offline(s);
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
    this.#offline.drop(clientId);
    // Only after the tombstone (a session whose tombstone failed comes back at a restart), and
    // only while the id has no stored session again (that one writes over the rows it uses).
    const then = this.#write(clientId, SESSION_TOMBSTONE).then((stored) => {
      if (stored && !this.#sessions.has(clientId)) {
        this.forgetter.forget(clientId, sessionConsumer(clientId), s.triples);
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
   * ones older than half the record topic's retention (and, on a log that is not compacted, of
   * offline ones: a topic made under shorter settings would drop them first). Returns how many
   * expired.
   */
  sweep(): number {
    const now = this.#now();
    const maxMs = this.#opts.maxExpiryS * 1000;
    const renewAfterMs = Math.min(maxMs, this.#retentionMs / 2 || Infinity);
    const stale = (s: StoredSession) =>
      msSince(s.savedAtMs, this.#now(), this.#opts) > renewAfterMs;
    let expired = 0;
    const renew: StoredSession[] = [];
    for (const s of [...this.#sessions.values()]) {
      // Only a session attached here is kept alive; a remote gateway's "connected" record that
      // its gateway stopped renewing (gone without a word) counts as offline since.
      if (
        s.offlineSinceMs === null && !this.#attached.has(s) &&
        msSince(s.savedAtMs, now, this.#opts) > 2 * maxMs
      ) {
        s.offlineSinceMs = s.savedAtMs;
        this.#offline.offline(s);
      }
      if (expiredAt(s, now, this.#opts)) {
        this.remove(s.clientId);
        expired++;
      } else if (stale(s) && this.#attached.has(s)) this.save(s);
      else if (stale(s) && !this.compactor.able) renew.push(s);
    }
    if (expired > 0) {
      this.#logger.info("Stored sessions expired", { count: expired });
      this.#opts.onExpired?.(expired);
    }
    // After reading what other gateways wrote: a session one of them resumed is not restated.
    if (renew.length > 0) {
      void this.sync().then(() => renew.forEach((r) => this.#renew(r, stale)));
    }
    this.#evictFor(0); // a lowered bound, or other gateways' sessions read meanwhile
    if (this.compactor.due(this.#sessions.size, this.#retentionMs)) this.compact();
    return expired;
  }

  /** An offline session's record on a log not compacted, still `stale`: written again. */
  #renew(s: StoredSession, stale: (s: StoredSession) => boolean): void {
    if (s.offlineSinceMs !== null && stale(s)) this.save(s);
  }

  /** Compacts the record topic now (`session_compaction.ts`); the sweeps do when one is due. */
  compact(): Promise<void> {
    return this.compactor.compact({
      written: () => this.#records.written(),
      ids: () => [...this.#sessions.keys()],
      restated: (id) => {
        const s = this.#sessions.get(id);
        return s === undefined ? null : this.#records.message(id, sessionRecordOf(s));
      },
      removalsSettled: async () => {
        await Promise.all([...this.#pending, this.#records.written()]);
        await this.forgetter.idle();
      },
    });
  }

  /** Evicts the sessions offline the longest until `room` new ones fit (`offline_order.ts`). */
  #evictFor(room: number): void {
    const over = () => this.#sessions.size + room > this.#opts.maxSessions;
    evictOldest(
      this.#offline,
      over,
      (s) => {
        this.remove(s.clientId);
        this.#opts.onEvicted?.();
      },
      this.#logger,
      this.#opts.maxSessions,
      this.#now(),
    );
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
    this.compactor.stop(); // what it restated stays; it drops nothing more
    await this.idle();
    await this.forgetter.stop();
    await this.compactor.idle();
  }

  /** Resolves when every record write so far, and the deletions after them, are answered. */
  async idle(): Promise<void> {
    while (this.#pending.size > 0 || this.#records.writing) {
      await Promise.all([...this.#pending, this.#records.written()]);
    }
    await this.forgetter.idle();
  }

  /** Seconds offline after which `s` is removed, under the settings now. */
  expiryOf(s: StoredSession): number {
    return expiryOf(s, this.#opts);
  }

  /** Appends a record; resolves true once it is stored, false when that failed (logged). */
  #write(clientId: string, record: unknown): Promise<boolean> {
    this.compactor.counted();
    return this.#records.write(clientId, record);
  }

  /** The record topic (malformed records skipped; the claims of client ids: `session_claims.ts`). */
  get records(): SessionRecordLog {
    return this.#records;
  }

  #readTail(): Promise<void> {
    return this.#records.readTail({
      counted: (m) => this.compactor.counted(m.timestampMicros / 1000),
      record: (id, r, m) => r.kind === "deleted" ? this.#applyTombstone(id) : this.#apply(id, r, m),
    });
  }

  #applyTombstone(clientId: string): void {
    const gone = this.#sessions.get(clientId)?.triples ?? [];
    this.#tombstoned?.note(clientId, sessionConsumer(clientId), gone);
    this.#sessions.delete(clientId);
    this.#offline.drop(clientId);
  }

  /** One record: the latest of a client id wins. */
  #apply(clientId: string, r: ParsedRecord & { kind: "session" }, m: StoredMessage): void {
    const known = this.#sessions.get(clientId);
    const wasOffline = known?.offlineSinceMs;
    this.#tombstoned?.stored(clientId);
    const s = known ?? newSession(clientId);
    r.apply(s, this.#opts.maxExpiryS);
    s.savedAtMs = Math.floor(m.timestampMicros / 1000);
    this.#sessions.set(clientId, s);
    // Loading, the order is made once the read is done; after, another gateway's record (one
    // that only writes a session again keeps its place).
    if (s.offlineSinceMs === null) this.#offline.drop(clientId);
    else if (this.#tombstoned === null && s.offlineSinceMs !== wasOffline) this.#offline.offline(s);
  }
}
