/**
 * The mark a PROXY preamble leaves on a TCP socket under a TLS one, shared by `tls_proxy.ts`
 * (which writes it) and `tls_listener.ts` (which reads it) without the listener importing the
 * PROXY code a gateway without `listeners.proxy_protocol_from` does not load.
 *
 * @module
 */
import type net from "node:net";

/** The client's address a PROXY header named, on the TCP socket under a TLS one. */
export const CLIENT_ADDRESS = Symbol("clientAddress");
/** A TCP socket that may carry {@link CLIENT_ADDRESS}. */
export type ProxiedSocket = net.Socket & { [CLIENT_ADDRESS]?: string };
