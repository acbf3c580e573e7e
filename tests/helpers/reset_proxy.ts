/**
 * A loopback TCP proxy that resets its connections: what a WAN uplink does to the gateway when
 * a NAT mapping times out, a load balancer drops a flow or a radio hands over. Every `everyMs`
 * it resets (TCP RST, not FIN) both sides of every connection open at that moment, so the
 * client sees "connection reset" on its next read or write and the server sees its peer gone.
 * New connections are proxied as before until the next reset.
 *
 * ```ts
 * const proxy = await startResetProxy({ target: "127.0.0.1:8090", everyMs: 2500 });
 * // point the client at proxy.address; proxy.resets counts the connections reset so far,
 * // onReset (an option) hears of each timed reset as it happens
 * await proxy.close();
 * ```
 *
 * @module
 */

import net from "node:net";

/** Options of {@link startResetProxy}. */
export interface ResetProxyOptions {
  /** `host:port` the proxy forwards to. */
  readonly target: string;
  /** Interval between resets (ms); 0 = only when {@link ResetProxy.resetNow} is called. */
  readonly everyMs: number;
  /** Called after each timed reset with the number of connections it reset (maybe 0). */
  readonly onReset?: (connections: number) => void;
}

/** A running reset proxy. */
export interface ResetProxy {
  /** `127.0.0.1:port` to connect to instead of the target. */
  readonly address: string;
  /** Client connections reset so far. */
  readonly resets: number;
  /** Client connections open now. */
  readonly connections: number;
  /** Resets every open connection now; returns how many it reset. */
  resetNow(): number;
  /** Stops the timer and listener and resets what is still open. */
  close(): Promise<void>;
}

interface Pair {
  readonly client: net.Socket;
  readonly upstream: net.Socket;
}

/** Starts a reset proxy on 127.0.0.1 (a free port) in front of `o.target`. */
export async function startResetProxy(o: ResetProxyOptions): Promise<ResetProxy> {
  const colon = o.target.lastIndexOf(":");
  const host = o.target.slice(0, colon).replace(/^\[|\]$/g, "");
  const port = Number(o.target.slice(colon + 1));
  const pairs = new Set<Pair>();
  let resets = 0;

  const drop = (pair: Pair): void => {
    if (!pairs.delete(pair)) return;
    // resetAndDestroy needs a connected socket; one still connecting is destroyed plainly
    for (const s of [pair.client, pair.upstream]) {
      if (s.destroyed) continue;
      if (s.pending || s.connecting) s.destroy();
      else s.resetAndDestroy();
    }
  };

  const server = net.createServer((client) => {
    const upstream = net.connect({ host, port });
    const pair = { client, upstream };
    pairs.add(pair);
    client.pipe(upstream);
    upstream.pipe(client);
    // A side that fails is reset on the other too; one that closes closes the other.
    for (const s of [client, upstream]) {
      s.on("error", () => drop(pair));
      s.on("close", () => {
        if (!pairs.delete(pair)) return;
        client.destroy();
        upstream.destroy();
      });
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });

  const resetNow = (): number => {
    const now = [...pairs];
    for (const pair of now) drop(pair);
    resets += now.length;
    return now.length;
  };
  const timer = o.everyMs > 0 ? setInterval(() => o.onReset?.(resetNow()), o.everyMs) : undefined;

  return {
    address: `127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    get resets() {
      return resets;
    },
    get connections() {
      return pairs.size;
    },
    resetNow,
    async close() {
      clearInterval(timer);
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const pair of [...pairs]) drop(pair);
      await closed;
    },
  };
}
