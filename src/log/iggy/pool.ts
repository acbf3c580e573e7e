/**
 * A small pool of service connections, each logged in as the gateway's Iggy identity.
 * Every slot reconnects on its own and registers again after an eviction (fresh client id, new
 * session): at once when the connection it loses had been up (a reset uplink, a restarted
 * load balancer), with jittered exponential back-off (capped at `reconnect_max_ms`) after
 * failed connects. A request that finds no connection while a slot reconnects at once waits
 * for it (never written yet, it can go on the fresh one); idle connections send PING every
 * `heartbeat_interval_ms`.
 *
 * @module
 */

import { classOf, Code, IggyConnectionError, operationFor } from "./codes.ts";
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

/**
 * A connection that lived this long had been up: when it dies its slot reconnects at once and
 * its back-off starts over. One that dies younger counts as a failed connect, so a server that
 * drops each connection right after Register is not logged into in a tight loop.
 */
export const UP_FOR_MS = 250;

/** Delay before reconnect attempt `attempt` (0-based): jittered, in [d/2, d], d capped. */
export function backoffDelay(attempt: number, maxMs: number, random: () => number): number {
  const d = Math.min(maxMs, BACKOFF_BASE_MS * 2 ** Math.min(attempt, 30));
  return Math.round(d / 2 + (d / 2) * random());
}

/**
 * May a request that failed with `e` go again on another connection? When it was never
 * written, or when it is a read (nothing is applied twice) that its connection's failure cut
 * off. Not after a timeout: the request took its whole time already.
 */
function goesAgain(e: unknown, code: number): boolean {
  if (e instanceof NotSentError) return true;
  return e instanceof IggyConnectionError && classOf(operationFor(code)) === "read";
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
  /** Slots reconnecting at once after losing a connection that had been up. */
  #reconnecting = 0;
  /** The requests' wait for a fresh connection (`#linked`): one promise and timer for all. */
  #waiting:
    | { promise: Promise<void>; resolve(): void; timer: ReturnType<typeof setTimeout> }
    | undefined;
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
   * Whether a request that finds no connection waits for one: a slot reconnects at once, or
   * is about to (its connection died and it has not yet looked).
   */
  get relinking(): boolean {
    return this.#reconnecting > 0 || this.#conns.some((c) => c?.isClosed);
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
    let failures = 0; // failed connects (and connections that died young) in a row
    let prompt = false; // the slot lost a connection that had been up
    // With BindSession, the first connection logs in and the others attach to its session.
    if (slot > 0 && this.#o.sessions) await this.#slot0Tried;
    for (let round = 0; !this.#closed; round++) {
      if (prompt) this.#reconnecting++;
      const conn = await this.#connect(slot, round === 0);
      if (prompt) this.#reconnecting--;
      if (conn) {
        this.#wake(); // requests waiting for a connection take this one
        const since = performance.now();
        this.#lastError = await conn.closed;
        this.#conns[slot] = undefined;
        prompt = performance.now() - since >= UP_FOR_MS;
        failures = prompt ? 0 : failures + 1;
      } else {
        prompt = false;
        failures++;
      }
      if (this.#closed) break;
      if (prompt) continue;
      // Backing off: requests that wait for a fresh connection now fail unless another comes.
      if (this.#reconnecting === 0) this.#wake();
      const random = this.#o.random ?? Math.random;
      await this.#sleep(backoffDelay(failures - 1, this.#o.reconnectMaxMs, random));
    }
  }

  /** Connects and logs in slot `slot`; its registered connection, or undefined on failure. */
  async #connect(slot: number, firstRound: boolean): Promise<Link | undefined> {
    let conn: Link | undefined;
    try {
      conn = await this.#o.chooser.connect(this.#o.dial, this.#o.credentials, {
        timeoutMs: this.#o.requestTimeoutMs,
        label: `#${slot}`,
      }, this.#o.sessions);
      if (this.#closed) {
        await conn.close();
        return undefined;
      }
      this.#conns[slot] = conn;
      if (slot === 0) this.#firstTried();
      this.#settleFirst(undefined);
      return conn;
    } catch (e) {
      this.#lastError = e as Error;
      await conn?.close();
      if (slot === 0) this.#firstTried();
      if (firstRound && ++this.#failures === this.#conns.length) this.#settleFirst(e as Error);
      return undefined;
    }
  }

  /** Resolves when a slot has a fresh connection, the slots back off, or a request timeout passed. */
  #linked(): Promise<void> {
    if (this.#waiting) return this.#waiting.promise;
    const { promise, resolve } = Promise.withResolvers<void>();
    const timer = setTimeout(() => this.#wake(), this.#o.requestTimeoutMs);
    this.#waiting = { promise, resolve, timer };
    return promise;
  }

  #wake(): void {
    const w = this.#waiting;
    this.#waiting = undefined;
    if (w === undefined) return;
    clearTimeout(w.timer);
    w.resolve();
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
    const idleSince = performance.now() - this.#o.heartbeatMs;
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
   * the socket (its connection died first), or a read whose connection died under it, goes
   * again on another connection, or on a fresh one when the pool is reconnecting at once (twice
   * more at most: a reset takes every connection at the same time, and each is found dead in
   * turn). Any other request that was sent is never repeated: its outcome is the caller's.
   */
  readonly request: PoolRequest = async (code, body, framed = false, options) => {
    let exclude: Link | undefined;
    let waited = false;
    for (let attempt = 0;; attempt++) {
      let conn = this.#pick(exclude);
      if (conn === undefined && !waited && !this.#closed && this.relinking) {
        waited = true;
        await this.#linked();
        conn = this.#pick(exclude);
      }
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
        if (attempt >= 2 || !goesAgain(e, code)) throw e;
        exclude = conn;
      }
    }
  };

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

  /** Closes every connection and stops reconnecting. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#firstTried();
    clearInterval(this.#heartbeat);
    for (const wake of [...this.#sleeps]) wake();
    this.#wake();
    this.#settleFirst(new IggyConnectionError("Iggy backend closed while opening"));
    await Promise.all(this.#conns.map((c) => c?.close()));
    await Promise.all(this.#loops);
  }
}
