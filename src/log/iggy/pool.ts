/**
 * A small pool of service connections, each logged in as the gateway's Iggy identity.
 * Every slot reconnects on its own with jittered exponential back-off (capped at
 * `reconnect_max_ms`) and registers again after an eviction (fresh client id, new session);
 * idle connections send PING every `heartbeat_interval_ms`.
 *
 * @module
 */

import { Code, IggyConnectionError } from "./codes.ts";
import { NotSentError } from "./codes.ts";
import type { DialectChooser, Link, SessionKeeper } from "./dialect.ts";
import type { Dialer } from "./dial.ts";
import type { Credentials, RegisterReply } from "./login.ts";
import type { PoolRequest } from "./partition_ops.ts";

/** Pool settings. */
export interface PoolOptions {
  readonly dial: Dialer;
  readonly credentials: Credentials;
  /** Picks the wire dialect of each connection (`iggy.protocol`). */
  readonly chooser: DialectChooser;
  /** Number of connections (≥ 1). */
  readonly size: number;
  readonly requestTimeoutMs: number;
  /** 0 = no heartbeat. */
  readonly heartbeatMs: number;
  readonly reconnectMaxMs: number;
  /** Source of jitter in [0, 1). */
  readonly random?: () => number;
  /** The 0.12 session further connections bind to instead of logging in (BindSession). */
  readonly sessions?: SessionKeeper;
  /** Keep reconnecting after a failed first round (a node of a cluster that is down). */
  readonly persistent?: boolean;
}

const BACKOFF_BASE_MS = 100;

/** Delay before reconnect attempt `attempt` (0-based): jittered, in [d/2, d], d capped. */
export function backoffDelay(attempt: number, maxMs: number, random: () => number): number {
  const d = Math.min(maxMs, BACKOFF_BASE_MS * 2 ** Math.min(attempt, 30));
  return Math.round(d / 2 + (d / 2) * random());
}

/** The service connection pool. */
export class IggyPool {
  readonly #o: PoolOptions;
  readonly #conns: (Link | undefined)[];
  readonly #loops: Promise<void>[] = [];
  readonly #sleeps = new Set<() => void>();
  #closed = false;
  #lastError: Error | undefined;
  #heartbeat: ReturnType<typeof setInterval> | undefined;
  #turn = 0;
  #firstOutcome: ((e?: Error) => void) | undefined;
  #failures = 0;
  #firstTried: () => void = () => {};
  /** Slot 0's first attempt is over: the other slots may bind to its session. */
  readonly #slot0Tried = new Promise<void>((r) => (this.#firstTried = r));

  constructor(options: PoolOptions) {
    this.#o = options;
    this.#conns = new Array(Math.max(1, options.size)).fill(undefined);
  }

  /** True when at least one connection is registered. */
  get ready(): boolean {
    return this.#conns.some((c) => c && !c.isClosed);
  }

  /** Replica id of the node this pool's connections reached (0.12), if known. */
  get replica(): number | undefined {
    return this.#conns.find((c) => c && !c.isClosed)?.replica;
  }

  /** Register reply of a live connection (server version, session), if any. */
  get registration(): RegisterReply | undefined {
    return this.#conns.find((c) => c && !c.isClosed)?.registration;
  }

  /** Why the pool is not ready (the last connect or login error). */
  get lastError(): Error | undefined {
    return this.#lastError;
  }

  /**
   * Starts every slot. Resolves once one connection is registered; rejects with the error
   * of the first round when every slot failed (the pool is then closed).
   */
  async open(): Promise<void> {
    const first = new Promise<Error | undefined>((resolve) => (this.#firstOutcome = resolve));
    for (let i = 0; i < this.#conns.length; i++) this.#loops.push(this.#runSlot(i));
    if (this.#o.heartbeatMs > 0) {
      this.#heartbeat = setInterval(() => this.#ping(), this.#o.heartbeatMs);
    }
    const error = await first;
    if (error) {
      if (!this.#o.persistent) await this.close();
      throw error;
    }
  }

  async #runSlot(slot: number): Promise<void> {
    let attempt = 0;
    let firstRound = true;
    // With BindSession, the first connection logs in and the others attach to its session.
    if (slot > 0 && this.#o.sessions) await this.#slot0Tried;
    while (!this.#closed) {
      let conn: Link | undefined;
      try {
        conn = await this.#o.chooser.connect(this.#o.dial, this.#o.credentials, {
          timeoutMs: this.#o.requestTimeoutMs,
          label: `#${slot}`,
        }, this.#o.sessions);
        if (this.#closed) {
          await conn.close();
          break;
        }
        this.#conns[slot] = conn;
        if (slot === 0) this.#firstTried();
        attempt = 0;
        this.#settleFirst(undefined);
        this.#lastError = await conn.closed;
        this.#conns[slot] = undefined;
      } catch (e) {
        this.#lastError = e as Error;
        await conn?.close();
        if (slot === 0) this.#firstTried();
        if (firstRound && ++this.#failures === this.#conns.length) this.#settleFirst(e as Error);
      }
      firstRound = false;
      if (this.#closed) break;
      await this.#sleep(
        backoffDelay(attempt++, this.#o.reconnectMaxMs, this.#o.random ?? Math.random),
      );
    }
  }

  #settleFirst(e: Error | undefined): void {
    const settle = this.#firstOutcome;
    this.#firstOutcome = undefined;
    settle?.(e);
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.#sleeps.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.#sleeps.add(wake);
    });
  }

  #ping(): void {
    const idleSince = Date.now() - this.#o.heartbeatMs;
    for (const c of this.#conns) {
      // a failed ping closes the connection; its slot then reconnects
      if (c && !c.isClosed && c.load === 0 && c.lastUsed <= idleSince) {
        c.request(Code.PING).catch(() => {});
      }
    }
  }

  #pick(exclude?: Link): Link | undefined {
    let best: Link | undefined;
    const n = this.#conns.length;
    this.#turn = (this.#turn + 1) % n;
    for (let k = 0; k < n; k++) {
      const c = this.#conns[(this.#turn + k) % n];
      if (!c || c.isClosed || c === exclude) continue;
      if (!best || c.load < best.load) best = c;
    }
    return best;
  }

  /**
   * Sends one command on the least-loaded registered connection. A request that never reached
   * the socket (its connection died first) is tried once more on another connection; a
   * request that was sent is never repeated.
   */
  readonly request: PoolRequest = async (code, body, framed = false, options) => {
    let exclude: Link | undefined;
    for (let attempt = 0;; attempt++) {
      const conn = this.#pick(exclude);
      if (!conn || this.#closed) {
        // Never written: a caller may send it again without risking a duplicate.
        throw new NotSentError(
          this.#closed
            ? "Iggy backend is closed"
            : (this.#lastError?.message ?? "No Iggy connection is ready"),
          { cause: this.#lastError },
        );
      }
      try {
        return await (framed
          ? conn.requestFramed(code, body!, options)
          : conn.request(code, body, options));
      } catch (e) {
        if (!(e instanceof NotSentError) || attempt >= 1) throw e;
        exclude = conn;
      }
    }
  };

  /** Closes every connection and stops reconnecting. Idempotent. */
  /**
   * Closes the connections on 0.12 session `session` and stops binding new ones to it: their
   * slots reconnect and register a fresh session (its producer ids ran out).
   */
  retire(session: bigint): void {
    const keeper = this.#o.sessions;
    if (keeper?.current?.session === session) keeper.current = undefined;
    for (const c of this.#conns) {
      if (c && !c.isClosed && c.registration?.session === session) c.close().catch(() => {});
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#firstTried();
    clearInterval(this.#heartbeat);
    for (const wake of [...this.#sleeps]) wake();
    this.#settleFirst(new IggyConnectionError("Iggy backend closed while opening"));
    await Promise.all(this.#conns.map((c) => c?.close()));
    await Promise.all(this.#loops);
  }
}
