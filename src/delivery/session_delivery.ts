/**
 * The delivery side of stored sessions: a stored session is a
 * stored position in the log. Per triple, the session's position is the first offset it has
 * not settled: the lowest offset among its unsettled QoS 1 copies, else how far its shared
 * reader (or its catch-up) has routed. Positions are stored as consumer offsets under the
 * client's consumer name (`sessionConsumer`) at every SUBSCRIBE, every
 * `limits.commit_interval_ms` while connected (a crash loses at most that much: those messages
 * come again, at least once) and at disconnect; a resume reads them back and catches up.
 *
 * @module
 */
import { SUBACK_FAILURE } from "../codec/encoder.ts";
import type { LogBackend } from "../log/port.ts";
import type { Logger } from "../observe/logger.ts";
import type { SubscriptionOptions } from "../codec/packets.ts";
import { keptOptions } from "../stored/stored_options.ts";
import {
  sessionConsumer,
  type StoredSession,
  type StoredSessions,
} from "../session/stored_sessions.ts";
import type { ClientQueue } from "./client_queue.ts";
import { type Triple, tripleOfKey } from "./registry.ts";
import type { ClientQueues } from "./subscriber_queues.ts";
import type { Resume, Subscriptions } from "./subscribe.ts";

/**
 * Where a group of stored sessions starts on a triple: the lowest of their positions (a
 * session that knows the triple but stored no offset there is at 0); null when none has one.
 */
export function lowestPositionOf(
  backend: Pick<LogBackend, "getOffset">,
  sessions: readonly StoredSession[],
) {
  return async (t: Triple, key: string): Promise<number | null> => {
    let lowest: number | null = null;
    for (const s of sessions) {
      const stored = await backend.getOffset(sessionConsumer(s.clientId), t);
      const at = stored !== null ? stored + 1 : s.triples.has(key) ? 0 : null;
      if (at !== null && (lowest === null || at < lowest)) lowest = at;
    }
    return lowest;
  };
}

/** What stored sessions' positions take of the log. */
type SessionPositions = Pick<LogBackend, "getOffset" | "storeOffset">;

/** Stored sessions' subscriptions and positions. */
export class SessionDelivery {
  #subs: Subscriptions;
  #clients: ClientQueues;
  #sessions: StoredSessions;
  #backend: SessionPositions;
  #logger: Logger;
  /** The position last stored per triple key, per client (stores only what moved). */
  #stored = new WeakMap<ClientQueue, Map<string, number>>();
  #pending = new Set<Promise<void>>();
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(deps: {
    subscriptions: Subscriptions;
    clients: ClientQueues;
    sessions: StoredSessions;
    backend: SessionPositions;
    logger: Logger;
    commitIntervalMs: number;
  }) {
    this.#subs = deps.subscriptions;
    this.#clients = deps.clients;
    this.#sessions = deps.sessions;
    this.#backend = deps.backend;
    this.#logger = deps.logger;
    this.#timer = setInterval(() => this.#storeAll(), deps.commitIntervalMs);
    Deno.unrefTimer(this.#timer as unknown as number);
  }

  /** A stored session's client subscribed: record the filter, store its start positions. */
  subscribed(
    queue: ClientQueue,
    session: StoredSession,
    filter: string,
    qos: 0 | 1 | 2,
    options?: SubscriptionOptions,
  ): void {
    session.subscriptions.set(filter, qos);
    const kept = keptOptions(options); // MQTT 5: they come back with the subscription
    if (kept !== undefined) (session.options ??= new Map()).set(filter, kept);
    else session.options?.delete(filter);
    this.#sessions.save(session);
    this.#storePositions(queue, session); // its triples join the record once stored
  }

  /** A stored session's client unsubscribed: the filter leaves its record. */
  unsubscribed(session: StoredSession, filters: readonly string[]): void {
    let changed = false;
    for (const f of filters) {
      changed = session.subscriptions.delete(f) || changed;
      session.options?.delete(f);
    }
    if (changed) this.#sessions.save(session);
  }

  /**
   * Restores a resumed session's subscriptions, each triple from its stored position (a
   * missing stored offset on a triple the session knew means offset 0), with one catch-up per
   * triple for all its filters, so overlapping filters still give one copy. It stops when the
   * client's queue is replaced (a takeover resumes on its own) or the gateway stops; a filter
   * leaves the record only on a permanent refusal, never on a passing failure.
   */
  async resume(queue: ClientQueue, session: StoredSession): Promise<void> {
    const consumer = sessionConsumer(session.clientId);
    const startAt = async (t: Triple, key: string) => {
      const stored = await this.#backend.getOffset(consumer, t);
      return stored !== null ? stored + 1 : session.triples.has(key) ? 0 : null;
    };
    const resume: Resume = { startAt, pending: new Map() };
    const gone = () => this.#subs.stopping() || this.#clients.get(queue.sub) !== queue;
    for (const [filter, qos] of [...session.subscriptions]) {
      if (gone()) return;
      const options = session.options?.get(filter);
      const f = options === undefined ? { filter, qos } : { filter, qos, options };
      const code = await this.#subs.subscribeOne(queue, f, resume);
      if (gone()) return;
      if (code < SUBACK_FAILURE) continue; // new triples join the record once stored
      this.#logger.warn("Stored subscription not restored", {
        client_id: session.clientId,
        filter,
        kept: resume.permanent !== true,
      });
      if (resume.permanent !== true) continue; // comes back at the next resume
      session.subscriptions.delete(filter);
      session.options?.delete(filter);
    }
    this.#subs.launch(queue, resume.pending, { left: Infinity });
    this.#sessions.save(session);
  }

  /** The client disconnected: store its positions (before its copies are struck), go offline. */
  detached(queue: ClientQueue | undefined, session: StoredSession): void {
    if (queue !== undefined) this.#storePositions(queue, session);
    this.#sessions.offline(session);
  }

  /** Per triple key, the first offset the client has not settled. */
  positions(queue: ClientQueue): Map<string, number> {
    const unsettled = queue.lowestUnsettled();
    const catchUps = new Map<string, number>();
    for (const c of this.#subs.catchUps.get(queue) ?? []) {
      // A resume's and a replay's catch-up may share a triple: the one further behind counts.
      catchUps.set(c.key, Math.min(c.position, catchUps.get(c.key) ?? Infinity));
    }
    const out = new Map<string, number>();
    for (const s of this.#subs.registry.ofClient(queue)?.values() ?? []) {
      for (const [k, start] of s.startOffsets) {
        let p = start === Infinity
          ? catchUps.get(k)
          : Math.max(start, this.#subs.readers.get(k)?.position ?? start);
        if (p === undefined) continue;
        p = Math.min(p, unsettled.get(k) ?? Infinity, out.get(k) ?? Infinity);
        out.set(k, p);
      }
    }
    return out;
  }

  /** Resolves when the position stores asked so far are answered (a session handed over). */
  async settled(): Promise<void> {
    await Promise.all([...this.#pending]);
  }

  /** Ends the timer and waits for the position stores in flight. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    while (this.#pending.size > 0) await Promise.all([...this.#pending]);
  }

  #storeAll(): void {
    for (const q of this.#clients.all()) {
      const session = q.sub.session;
      if (session !== null) this.#storePositions(q, session);
    }
  }

  /**
   * Stores the positions that moved (a consumer offset is the last settled: position − 1). A
   * triple enters the session's record only once its position is stored (or is 0): a known
   * triple without a stored offset resumes at offset 0, the whole history. What failed to
   * store is not marked stored, so the next round tries again.
   */
  #storePositions(queue: ClientQueue, session: StoredSession): void {
    let last = this.#stored.get(queue);
    if (!last) this.#stored.set(queue, last = new Map());
    const stored = last;
    const consumer = sessionConsumer(session.clientId);
    let known = true;
    for (const [k, p] of this.positions(queue)) {
      if (p < 1 && !session.triples.has(k)) { // at offset 0: "known, none stored" says it all
        session.triples.add(k);
        known = false;
      }
      if (p < 1 || stored.get(k) === p) continue;
      const done = this.#backend.storeOffset(consumer, tripleOfKey(k), p - 1).then(() => {
        stored.set(k, p);
        // A triple joined later (a wildcard's new target) becomes one the session knows.
        if (session.triples.has(k)) return;
        session.triples.add(k);
        this.#sessions.save(session);
      }, (err) => {
        this.#logger.limited("warn", "Storing a stored session's position failed", {
          client_id: session.clientId,
          error: err,
        });
      }).finally(() => this.#pending.delete(done));
      this.#pending.add(done);
    }
    if (!known) this.#sessions.save(session);
  }
}
