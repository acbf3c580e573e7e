/**
 * Live connections: the `max_connections` bound and client-id ownership for session
 * takeover [MQTT-3.1.4-2]: a second CONNECT with the same client id closes the older one.
 *
 * @module
 */

/** What the registry needs of a connection. */
export interface Registered {
  /** Closes the connection; `reason` goes to the log. */
  close(reason: string): void;
  /** Closes, telling an MQTT 5 client why (DISCONNECT with `reasonCode`) first. */
  disconnect?(reasonCode: number, reason: string): void;
}

/** Connection and client-id bookkeeping. */
export class ConnectionRegistry {
  #open = new Set<Registered>();
  #byClientId = new Map<string, Registered>();

  constructor(readonly maxConnections: number) {}

  /** Open connections (sockets accepted and not yet closed). */
  get size(): number {
    return this.#open.size;
  }

  /** Connections that completed CONNECT. */
  get connected(): number {
    return this.#byClientId.size;
  }

  /** Admits a new socket, or returns false at `max_connections`. */
  admit(c: Registered): boolean {
    if (this.#open.size >= this.maxConnections) return false;
    this.#open.add(c);
    return true;
  }

  /** Binds a client id to `c`; returns the connection it took over, if any. */
  claim(clientId: string, c: Registered): Registered | null {
    const old = this.#byClientId.get(clientId) ?? null;
    this.#byClientId.set(clientId, c);
    return old === c ? null : old;
  }

  /** Forgets `c` (and its client id, if it still owns it). */
  release(c: Registered, clientId: string | null): void {
    this.#open.delete(c);
    if (clientId !== null && this.#byClientId.get(clientId) === c) {
      this.#byClientId.delete(clientId);
    }
  }

  /** Every open connection (for drain). */
  all(): Registered[] {
    return [...this.#open];
  }
}
