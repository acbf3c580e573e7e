/**
 * What a bound MQTT listener is to the gateway, whichever layer drives its sockets (`listeners.ts`
 * for TCP, `tls_listener.ts` for TLS).
 *
 * @module
 */
import type { Transport } from "../session/transport.ts";
import type { RevocationList } from "./revocation.ts";

/** The TLS listener's files, read and swapped together (start and SIGHUP). */
export interface TlsMaterial {
  readonly cert: string;
  readonly key: string;
  /** PEM CA certificate(s) client certificates must chain to (client auth on). */
  readonly clientCa?: string;
  /** Revoked client certificates (`listeners.tls_crl_file`), or null for no check. */
  readonly revoked?: RevocationList | null;
}

/** A bound MQTT listener. */
export interface MqttListener {
  readonly kind: "tcp" | "tls" | "ws" | "wss";
  /**
   * What drives its sockets: `epoll` (libc via FFI), `node` (node:net / node:tls) or `deno`
   * (Deno's HTTP server, WebSocket).
   */
  readonly layer: "epoll" | "node" | "deno";
  readonly hostname: string;
  readonly port: number;
  /** Stops accepting; open connections are not affected. */
  close(): void;
  /** Swaps the TLS material for new handshakes (hot reload); TCP has none. */
  reloadTls?(material: TlsMaterial): Promise<void>;
}

/** Called for every accepted connection. */
export type AcceptHandler = (t: Transport) => void;

/**
 * A reload that failed at a secure listener after another had taken the new certificate
 * (`swapped`, e.g. `["tls"]`): the map and users stay the previous ones, those listeners do not.
 */
export class PartialReloadError extends Error {
  constructor(readonly swapped: readonly string[], cause: unknown) {
    super(String((cause as Error)?.message ?? cause), { cause });
  }
}

/**
 * Hands the new TLS material to each secure listener in turn (tls before wss); a failure stops
 * there, as it is, or as a {@link PartialReloadError} once a listener has swapped.
 */
export async function reloadSecureListeners(
  listeners: readonly MqttListener[],
  material: TlsMaterial,
): Promise<void> {
  const swapped: string[] = [];
  try {
    for (const l of listeners) {
      await l.reloadTls?.(material);
      swapped.push(l.kind);
    }
  } catch (err) {
    if (swapped.length === 0) throw err;
    throw new PartialReloadError(swapped, err);
  }
}
