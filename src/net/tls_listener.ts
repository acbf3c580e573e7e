/**
 * The MQTT TLS listener (node:tls), with optional client certificates
 * (`listeners.tls_client_auth`): a certificate that does not chain to `listeners.tls_client_ca_file`,
 * one the CRL lists and (with `require`) none at all are refused right after the handshake,
 * before a byte of MQTT is read, with the reason (tls_refusal.ts); a verified certificate's name
 * travels on the transport as the peer's principal name.
 *
 * @module
 */
import type net from "node:net";
import type tls from "node:tls";
import { OperatorError } from "../config/errors.ts";
import { formatAddress } from "./bind_error.ts";
import { judgePeer, type TlsClientAuth, type TlsIdentity } from "./client_certificate.ts";
import type { AcceptHandler, MqttListener, TlsMaterial } from "./mqtt_listener.ts";
import { bind, NodeSocketTransport, plainAddress } from "./node_transport.ts";
import { caSubjectsOf, handshakeFailure, TlsReason } from "./tls_refusal.ts";
import type { ProxyOptions } from "./proxy_transport.ts";
import { CLIENT_ADDRESS, type ProxiedSocket } from "./proxied_socket.ts";
// A type-only import: `deno run` does not load the module for it.
import type * as TlsProxy from "./tls_proxy.ts";

/** Why a TLS connection ended before it became an MQTT connection (counters). */
export type TlsRefusal =
  | "handshake"
  | "timeout"
  | "client_cert_missing"
  | "client_cert_unverified"
  | "client_cert_revoked";

/** A connection refused during or right after its handshake. */
export interface TlsRefused {
  /** For the counters. */
  readonly why: TlsRefusal;
  /** The peer's IP. */
  readonly remote: string;
  /** For the log line: a short stable reason (tls_refusal.ts) or the TLS stack's message. */
  readonly reason: string;
}

/** Bounds and hooks of a TLS listener. */
export interface TlsListenOptions {
  /** A handshake not done by then is dropped (`limits.connect_timeout_ms`). */
  readonly handshakeTimeoutMs: number;
  /** Sockets of this listener at once, handshaking or not (`limits.max_connections`). */
  readonly maxConnections: number;
  /** Client certificates: not asked for, asked for, or required. */
  readonly clientAuth: TlsClientAuth;
  /** Which certificate name is the principal. */
  readonly identity: TlsIdentity;
  /** A connection was refused during or right after its handshake. */
  onRefused(r: TlsRefused): void;
  /** A peer closed before its handshake was done: not a refusal (TCP health checks do it). */
  onAbandoned(remote: string): void;
  /** Where the certificate and key came from, for the error on unusable ones. */
  readonly source?: string;
  /** The PROXY protocol before the handshake (`listeners.proxy_protocol_from`). */
  readonly proxy?: ProxyOptions;
}

/**
 * Throws when `cert`/`key` is not a usable PEM pair: node:tls here accepts any text and fails
 * only at the next handshake, so the pair is proven on a throwaway loopback listener. A client
 * CA must hold at least one PEM certificate.
 */
export function proveTlsMaterial(m: TlsMaterial): void {
  Deno.listenTls({ hostname: "127.0.0.1", port: 0, cert: m.cert, key: m.key }).close();
  if (m.clientCa !== undefined && !m.clientCa.includes("-----BEGIN CERTIFICATE-----")) {
    throw new Error("the client CA file holds no PEM certificate");
  }
}

/** When a TLS listener accepted the TCP socket under a TLS socket (`performance.now()`). */
const ACCEPTED_AT = Symbol("acceptedAt");
type TimedSocket = ProxiedSocket & { [ACCEPTED_AT]?: number };

/**
 * Binds a TLS listener (node:tls). The connect deadline includes the handshake: node:tls
 * drops a handshake that takes longer than `handshakeTimeoutMs`, and the connection's own
 * deadline then runs from the TCP accept, not from the end of the handshake. (Deno's
 * `listenTls` could not do this: closing a `TlsConn` whose handshake is in progress left the
 * TCP socket open until the peer went, denoland/deno#14547, so a trickled ClientHello held a
 * socket forever.) A reload swaps the secure context (certificate, key, client CA) and the CRL
 * for new handshakes; connections already open are not touched. Rejects with an OperatorError
 * naming the address when it cannot be bound or when the material is not usable PEM
 * (`o.source` says where it came from).
 */
export function listenTls(
  hostname: string,
  port: number,
  material: TlsMaterial,
  o: TlsListenOptions,
  onAccept: AcceptHandler,
): Promise<MqttListener> {
  try {
    proveTlsMaterial(material);
  } catch (err) {
    const where = `MQTT TLS listener ${formatAddress(hostname, port)}`;
    const what = material.clientCa === undefined
      ? "certificate or key"
      : "certificate, key or client CA";
    const msg = `${where}: unusable ${what} (${(err as Error).message})`;
    const error = new OperatorError("invalid_file", msg + (o.source ? ` in ${o.source}` : ""), {
      cause: err,
    });
    return Promise.reject(error);
  }
  // node:tls only when a TLS listener is configured: its modules are RSS a plain-TCP gateway
  // would carry for nothing.
  // The PROXY front likewise, only with `listeners.proxy_protocol_from`, from a URL built at run
  // time: `deno run` keeps the source of every module a literal import names.
  const proxyModule: Promise<typeof TlsProxy | null> = o.proxy
    ? import(new URL("./tls_proxy.ts", import.meta.url).href)
    : Promise.resolve(null);
  return Promise.all([import("node:tls"), import("node:net"), proxyModule]).then(
    ([tls, net, p]) => {
      const state = stateOf(material);
      const secure = tlsServer(tls.default, material, state, o, onAccept);
      const front = o.proxy &&
        p!.proxyFront(net.default, secure, o.proxy, o.maxConnections, stampAccept);
      return bindTls(secure, front, hostname, port, state, o);
    },
  );
}

/** What a reload swaps besides the secure context. */
interface TlsState {
  revoked: NonNullable<TlsMaterial["revoked"]> | null;
  /** The client CA's subjects: an issuer not among them is an unknown CA. */
  caSubjects: ReadonlySet<string>;
}

function stateOf(m: TlsMaterial): TlsState {
  return { revoked: m.revoked ?? null, caSubjects: caSubjectsOf(m.clientCa ?? "") };
}

function secureOptions(m: TlsMaterial, clientAuth: TlsClientAuth): tls.SecureContextOptions {
  const base = { cert: m.cert, key: m.key, minVersion: "TLSv1.2" as const };
  return clientAuth === "none" ? base : { ...base, ca: m.clientCa };
}

function stampAccept(raw: TimedSocket): void {
  raw[ACCEPTED_AT] = performance.now();
}

/**
 * Binds the TLS server, or the PROXY protocol's TCP server in front of it; reloads swap its
 * secure context and revocation list.
 */
function bindTls(
  server: tls.Server,
  front: net.Server | undefined,
  hostname: string,
  port: number,
  state: TlsState,
  o: TlsListenOptions,
): Promise<MqttListener> {
  const bound = front ?? server;
  return bind(bound, "MQTT TLS listener", hostname, port).then((a) => ({
    kind: "tls",
    layer: "node",
    hostname: a.address,
    port: a.port,
    close: () => bound.close(),
    reloadTls(next: TlsMaterial) {
      proveTlsMaterial(next); // bad material throws here: the old one stays
      server.setSecureContext(secureOptions(next, o.clientAuth));
      Object.assign(state, stateOf(next));
      return Promise.resolve();
    },
  }));
}

/** node:tls keeps the TCP socket under the TLS one as `_parent` (not typed). */
function parentOf(socket: tls.TLSSocket): TimedSocket | undefined {
  return (socket as unknown as { _parent?: TimedSocket })._parent;
}

/**
 * The peer's IP: the client's a PROXY header named; else the socket's (a TLS socket whose
 * handshake failed has none of its own, its TCP socket has).
 */
function peerAddressOf(socket: tls.TLSSocket): string {
  const raw = parentOf(socket);
  return raw?.[CLIENT_ADDRESS] ??
    plainAddress(socket.remoteAddress ?? raw?.remoteAddress ?? "");
}

/** A finished handshake: the client certificate judged (when asked for), then accepted. */
function acceptSecure(
  socket: tls.TLSSocket,
  state: TlsState,
  o: TlsListenOptions,
  onAccept: AcceptHandler,
): void {
  let name: string | undefined;
  if (o.clientAuth !== "none") {
    const verdict = judgePeer(socket, { ...state, clientAuth: o.clientAuth, identity: o.identity });
    if (!verdict.ok) {
      const remote = peerAddressOf(socket);
      socket.destroy();
      return o.onRefused({ why: `client_cert_${verdict.why}`, remote, reason: verdict.reason });
    }
    name = verdict.name;
  }
  const raw = parentOf(socket);
  onAccept(new NodeSocketTransport(socket, raw?.[ACCEPTED_AT], name, raw?.[CLIENT_ADDRESS]));
}

/** The node:tls server: bounded handshakes, accept time kept, failed handshakes dropped. */
function tlsServer(
  tls: typeof import("node:tls"),
  material: TlsMaterial,
  state: TlsState,
  o: TlsListenOptions,
  onAccept: AcceptHandler,
): tls.Server {
  const server = tls.createServer({
    ...secureOptions(material, o.clientAuth),
    ALPNProtocols: ["mqtt"],
    handshakeTimeout: o.handshakeTimeoutMs,
    requestCert: o.clientAuth !== "none",
    // Deno's node:tls finishes the TLS handshake either way: its client-certificate verifier
    // records a chain that fails rather than failing the handshake (the handshake's signature
    // is checked against the certificate in both; a v1 certificate, which never verifies,
    // excepted), and with `true` its JS layer then closes the socket as "socket hang up". With
    // `false` the same verification sets socket.authorized and judgePeer closes the socket at
    // the same point, able to say why.
    rejectUnauthorized: false,
  });
  // Sockets still in their handshake hold no connection slot yet: this bounds them too.
  server.maxConnections = o.maxConnections;
  server.on("connection", (raw: TimedSocket) => {
    raw[ACCEPTED_AT] ??= performance.now(); // set: accepted before its PROXY header
    raw.setNoDelay(true);
  });
  server.on("secureConnection", (socket: tls.TLSSocket) => {
    try {
      acceptSecure(socket, state, o, onAccept);
    } catch (e) {
      // Nothing a client sends may end the process: this connection alone is refused.
      const remote = peerAddressOf(socket);
      socket.destroy();
      o.onRefused({ why: "handshake", remote, reason: String((e as Error)?.message ?? e) });
    }
  });
  // A failed or timed-out handshake: the socket must go now (Deno's node:tls leaves it open).
  server.on("tlsClientError", (err: Error, socket: tls.TLSSocket) => {
    const remote = peerAddressOf(socket);
    socket.destroy();
    const { reason, refused } = handshakeFailure(err);
    if (!refused) return o.onAbandoned(remote);
    o.onRefused({ why: reason === TlsReason.TIMEOUT ? "timeout" : "handshake", remote, reason });
  });
  return server;
}
