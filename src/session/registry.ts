/**
 * Live connections: the `max_connections` bound and the client id each connection holds, for
 * session takeover [MQTT-3.1.4-2]: a second CONNECT with the same client id closes the older
 * one (only a CONNECT of the same principal gets this far: `client_id_owner.ts`); an id taken
 * over again and again is logged (`takeover_watch.ts`). A CONNECT through another gateway on the
 * same Iggy takes the id over through a claim (`session_claims.ts`): {@link takenOverElsewhere}.
 *
 * @module
 */

import type { TakeoverWatch } from "./takeover_watch.ts";

/** What the registry needs of a connection. */
export interface Registered {
  /** Closes the connection; `reason` goes to the log. */
  close(reason: string): void;
  /** Closes, telling an MQTT 5 client why (DISCONNECT with `reasonCode`) first. */
  disconnect?(reasonCode: number, reason: string): void;
  /** The principal that owns its client id ("" anonymous); undefined before CONNECT. */
  readonly ownerName?: string;
  /** The peer's address, for the log. */
  readonly remoteAddress?: string;
  /** Forgets its will (a connection refused after its CONNACK ends without one). */
  discardWill?(): void;
  /** Its stored session, if any (a takeover across gateways hands it over). */
  readonly session?: object | null;
  /** Its own claim of the client id, where claims are written (`session_claims.ts`). */
  readonly claim?: { readonly nonce: string; readonly seen: boolean } | null;
}

/** Connection and client-id bookkeeping. */
export class ConnectionRegistry {
  #open = new Set<Registered>();
  #byClientId = new Map<string, Registered>();

  readonly #watch: TakeoverWatch | undefined;

  constructor(readonly maxConnections: number, watch?: TakeoverWatch) {
    this.#watch = watch;
  }

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

  /**
   * The principal of the live connection under `clientId` ("" anonymous), or null when none
   * is connected (`client_id_owner.ts`).
   */
  ownerOf(clientId: string): string | null {
    return this.#byClientId.get(clientId)?.ownerName ?? null;
  }

  /** The live connection under `clientId`, if any. */
  holder(clientId: string): Registered | undefined {
    return this.#byClientId.get(clientId);
  }

  /** Binds a client id to `c`; returns the connection it took over, if any. */
  claim(clientId: string, c: Registered): Registered | null {
    const old = this.#byClientId.get(clientId) ?? null;
    this.#byClientId.set(clientId, c);
    return old === c ? null : old;
  }

  /**
   * Binds a client id to `c` and closes the connection it took over, if any (MQTT 5: DISCONNECT
   * 0x8E Session taken over first); returns whether there was one.
   */
  takeOver(clientId: string, c: Registered): boolean {
    const old = this.claim(clientId, c);
    if (old === null) return false;
    this.#watch?.noted(clientId, old.remoteAddress, c.remoteAddress);
    takeOverFrom(old, "taken over by a new connection with the same client id");
    return true;
  }

  /**
   * A connection through another gateway (`gateway`) claimed `clientId`: the one here is closed
   * as in {@link takeOver}; returns it, or undefined when none is live here.
   */
  takenOverElsewhere(clientId: string, gateway: string): Registered | undefined {
    const old = this.#byClientId.get(clientId);
    if (old === undefined) return undefined;
    this.#byClientId.delete(clientId);
    this.#watch?.noted(clientId, old.remoteAddress, `gateway ${gateway}`);
    takeOverFrom(old, `taken over by a new connection through gateway ${gateway}`);
    return old;
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

/** Closes a connection taken over (MQTT 5: DISCONNECT 0x8E Session taken over first). */
function takeOverFrom(old: Registered, why: string): void {
  if (old.disconnect) old.disconnect(0x8e, why);
  else old.close(why);
}
