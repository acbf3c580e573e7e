/**
 * The nodes of one Iggy cluster (`iggy.address` with several comma-separated addresses), one
 * connection pool each. On 0.12 a partition request names its primary's replica id (from the
 * route) and goes to the pool whose connections reached that replica (the `replica` byte of
 * its replies); everything else, and a partition request whose primary is not connected, goes
 * to any live node. A node that is down keeps reconnecting in the background; while it is down
 * its requests fail over to the next live node, whose NotPrimary answer then re-routes.
 * One address is a one-node cluster.
 *
 * @module
 */

import { NotSentError } from "./codes.ts";
import type { Dialer } from "./dial.ts";
import type { RegisterReply } from "./login.ts";
import { IggyPool, type PoolOptions } from "./pool.ts";
import type { PoolRequest } from "./partition_ops.ts";

const ONLY_NODE: readonly number[] = Object.freeze([0]);

/** A cluster of node pools. */
export class ClusterPool {
  readonly #pools: IggyPool[];
  readonly #dials: Dialer[];
  #turn = 0;

  /** One pool per dialer; `options` are shared (their `dial` is replaced). */
  constructor(dials: readonly Dialer[], options: Omit<PoolOptions, "dial">) {
    if (dials.length === 0) throw new RangeError("An Iggy cluster needs at least one address");
    this.#dials = [...dials];
    const persistent = dials.length > 1;
    this.#pools = dials.map((dial) => new IggyPool({ ...options, dial, persistent }));
  }

  /** Number of nodes. */
  get size(): number {
    return this.#pools.length;
  }

  /** True when any node has a registered connection. */
  get ready(): boolean {
    return this.#pools.some((p) => p.ready);
  }

  get lastError(): Error | undefined {
    return this.#pools.find((p) => p.lastError)?.lastError;
  }

  get registration(): RegisterReply | undefined {
    for (const p of this.#pools) if (p.ready && p.registration) return p.registration;
    return undefined;
  }

  /** Nodes ready now. */
  get readyNodes(): number {
    return this.#pools.filter((p) => p.ready).length;
  }

  /** Resolves once any node registered; rejects with the first error when every node failed. */
  async open(): Promise<void> {
    const results = await Promise.allSettled(this.#pools.map((p) => p.open()));
    if (results.some((r) => r.status === "fulfilled")) return;
    const first = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
    await this.close();
    throw first.reason;
  }

  /**
   * A dialer that tries each node in turn, a ready one first (short-lived connections, e.g.
   * logging an MQTT user in).
   */
  readonly dial: Dialer = async () => {
    let last: unknown;
    for (const i of this.#order()) {
      try {
        return await this.#dials[i]();
      } catch (e) {
        last = e;
      }
    }
    throw last;
  };

  #order(node?: number): readonly number[] {
    const n = this.#pools.length;
    if (n === 1) return ONLY_NODE; // every request of a one-node cluster: no arrays made

    this.#turn = (this.#turn + 1) % n;
    const all = Array.from({ length: n }, (_, k) => (this.#turn + k) % n);
    const primary = node === undefined
      ? []
      : all.filter((i) => this.#pools[i].ready && this.#pools[i].replica === node);
    const live = all.filter((i) => this.#pools[i].ready && !primary.includes(i));
    const down = all.filter((i) => !this.#pools[i].ready);
    return [...primary, ...live, ...down];
  }

  /**
   * Sends one request: to the primary named by `options.node` when connected, else to any
   * live node; a node without a ready connection passes the request to the next, unless it is
   * reconnecting at once (the request then waits for it there).
   */
  readonly request: PoolRequest = async (code, body, framed, options) => {
    let last: unknown;
    for (const i of this.#order(options?.node)) {
      const pool = this.#pools[i];
      if (!pool.ready && !pool.relinking && this.#pools.length > 1) {
        last ??= new NotSentError(pool.lastError?.message ?? "No Iggy node is ready");
        continue;
      }
      try {
        return await pool.request(code, body, framed, options);
      } catch (e) {
        // Only a request that never reached a node moves on; a sent one is the caller's.
        if (!(e instanceof NotSentError) || this.#pools.length === 1) throw e;
        last = e;
      }
    }
    throw last ?? new NotSentError("No Iggy node is ready");
  };

  /** Closes every connection on 0.12 session `session`; they reconnect under a fresh one. */
  retire(session: bigint): void {
    for (const p of this.#pools) p.retire(session);
  }

  async close(): Promise<void> {
    await Promise.all(this.#pools.map((p) => p.close()));
  }
}
