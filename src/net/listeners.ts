/**
 * The only code that touches sockets for MQTT: TCP (epoll over libc, or node:net) and TLS
 * (node:tls) listeners that hand every accepted connection to the gateway as a
 * {@link Transport}.
 *
 * @module
 */
import type net from "node:net";
import type tls from "node:tls";
import { OperatorError } from "../config/errors.ts";
import { bindError, formatAddress } from "./bind_error.ts";
import { bindableIp, EpollListener } from "./_epoll_listener.ts";
import { addressOf, openLibc, sockaddrOf } from "./_libc.ts";
import type { Transport, TransportSink } from "../session/transport.ts";

/** A bound MQTT listener. */
export interface MqttListener {
  readonly kind: "tcp" | "tls";
  /** What drives its sockets: `epoll` (libc via FFI) or `node` (node:net / node:tls). */
  readonly layer: "epoll" | "node";
  readonly hostname: string;
  readonly port: number;
  /** Stops accepting; open connections are not affected. */
  close(): void;
  /** Swaps the TLS certificate for new handshakes (hot reload); TCP ignores it. */
  reloadTls?(cert: string, key: string): Promise<void>;
}

/** Called for every accepted connection. */
export type AcceptHandler = (t: Transport) => void;

/** Where a node:net socket's transport finds its sink (no closure per socket). */
const SINK = Symbol("sink");
type SinkedSocket = net.Socket & { [SINK]?: TransportSink | null };

// One set of listener functions for every socket (`this` is the socket).
function onData(this: SinkedSocket, chunk: Uint8Array): void {
  this[SINK]?.data(chunk);
}
function onEnd(this: SinkedSocket): void {
  endSink(this);
}
function onError(this: SinkedSocket, error: Error): void {
  endSink(this, error);
}
function endSink(socket: SinkedSocket, error?: unknown): void {
  const sink = socket[SINK];
  socket[SINK] = null;
  sink?.end(error);
}

/**
 * A node:net socket as a push transport. node:net waits for readability and takes a buffer
 * only when bytes arrive, so an idle socket holds no read promise or buffer: measured 4.4 KB
 * of RSS per idle socket against 6.9 KB for `Deno.listen` with a pending 512-byte read.
 */
class NodeSocketTransport implements Transport {
  readonly remoteAddress: string;
  readonly acceptedAt: number | undefined;
  readonly #socket: SinkedSocket;

  constructor(socket: net.Socket, acceptedAt?: number) {
    this.#socket = socket;
    this.remoteAddress = plainAddress(socket.remoteAddress ?? "");
    this.acceptedAt = acceptedAt;
  }

  start(sink: TransportSink): void {
    const socket = this.#socket;
    if (socket[SINK] !== undefined) return;
    socket[SINK] = sink;
    socket.on("data", onData);
    socket.on("end", onEnd);
    socket.on("close", onEnd);
    socket.on("error", onError);
  }

  pause(): void {
    this.#socket.pause();
  }

  resume(): void {
    this.#socket.resume();
  }

  write(bytes: Uint8Array): Promise<number> {
    const socket = this.#socket;
    return new Promise((resolve, reject) => {
      if (socket.destroyed) return reject(new Error("socket closed"));
      socket.write(bytes, (err) => err ? reject(err) : resolve(bytes.length));
    });
  }

  close(): void {
    this.#socket.destroy();
  }
}

/** "::ffff:10.0.0.1" (an IPv4 peer of a dual-stack socket) → "10.0.0.1". */
function plainAddress(address: string): string {
  return address.startsWith("::ffff:") && address.includes(".") ? address.slice(7) : address;
}

/** `listeners.tcp_socket_layer`. */
export type TcpSocketLayer = "auto" | "epoll" | "node";

/** How the TCP listener is driven, and what it reports. */
export interface TcpListenOptions {
  /** `auto`: epoll where libc can be used (Linux, `--allow-ffi`), node:net otherwise. */
  readonly layer: TcpSocketLayer;
  /** `auto` fell back to node:net; `reason` says why (one log line). */
  onFallback(reason: string): void;
  /** A connection was closed at once for want of file descriptors (epoll layer). */
  onShed(): void;
}

/**
 * Binds a TCP listener: epoll (memory per idle connection is only the gateway's own objects:
 * node:net holds 5.3–5.8 KB of RSS per idle socket, docs/BENCHMARKS.md) or node:net (see
 * {@link NodeSocketTransport}). Rejects with an OperatorError naming the address when it
 * cannot be bound (port in use, not ours, privileged), or naming the key when `epoll` was
 * asked for and cannot be used.
 */
export function listenTcp(
  hostname: string,
  port: number,
  o: TcpListenOptions,
  onAccept: AcceptHandler,
): Promise<MqttListener> {
  if (o.layer !== "node") {
    const opened = openLibc();
    const ip = bindableIp(hostname);
    const why = "reason" in opened
      ? opened.reason
      : ip === null
      ? `"${hostname}" is not an IP`
      : "";
    if (why === "") return listenEpoll(hostname, ip!, port, o, onAccept);
    if (o.layer === "epoll") {
      const msg = `listeners.tcp_socket_layer = "epoll" cannot be used: ${why}`;
      return Promise.reject(new OperatorError("not_capable", msg));
    }
    o.onFallback(why);
  }
  return listenNode(hostname, port, onAccept);
}

function listenEpoll(
  hostname: string,
  ip: Uint8Array,
  port: number,
  o: TcpListenOptions,
  onAccept: AcceptHandler,
): Promise<MqttListener> {
  const opened = openLibc();
  if (!("libc" in opened)) throw new Error("unreachable: libc was opened");
  try {
    const l = new EpollListener(opened.libc, ip, port, { accept: onAccept, shed: o.onShed });
    return Promise.resolve({
      kind: "tcp",
      layer: "epoll",
      hostname: addressOf(sockaddrOf(ip, 0)),
      port: l.port,
      close: () => l.close(),
    });
  } catch (err) {
    return Promise.reject(bindError("MQTT listener", hostname, port, err));
  }
}

/** node:net, imported only then: with the epoll layer its modules would be RSS for nothing. */
async function listenNode(
  hostname: string,
  port: number,
  onAccept: AcceptHandler,
): Promise<MqttListener> {
  const { default: net } = await import("node:net");
  const server = net.createServer((socket) => {
    socket.setNoDelay(true);
    onAccept(new NodeSocketTransport(socket));
  });
  return await bind(server, "MQTT listener", hostname, port).then((a) => ({
    kind: "tcp",
    layer: "node",
    hostname: a.address,
    port: a.port,
    close: () => server.close(),
  }));
}

/** Listens on host:port; rejects with an OperatorError naming `what` and the address. */
function bind(
  server: net.Server,
  what: string,
  hostname: string,
  port: number,
): Promise<net.AddressInfo> {
  return new Promise((resolve, reject) => {
    const failed = (err: Error) => reject(bindError(what, hostname, port, err));
    server.once("error", failed);
    server.listen({ host: hostname, port }, () => {
      server.off("error", failed);
      // Later server errors (e.g. a failed accept) must not take the process down.
      server.on("error", () => {});
      resolve(server.address() as net.AddressInfo);
    });
  });
}

/** Bounds and hooks of a TLS listener. */
export interface TlsListenOptions {
  /** A handshake not done by then is dropped (`limits.connect_timeout_ms`). */
  readonly handshakeTimeoutMs: number;
  /** Sockets of this listener at once, handshaking or not (`limits.max_connections`). */
  readonly maxConnections: number;
  /** A handshake failed (`timedOut`: it did not finish in time); for the counters. */
  onHandshakeFailed(timedOut: boolean): void;
  /** Where the certificate and key came from, for the error on unusable ones. */
  readonly source?: string;
}

/**
 * Throws when `cert`/`key` is not a usable PEM pair: node:tls here accepts any text and fails
 * only at the next handshake, so the pair is proven on a throwaway loopback listener.
 */
function proveTlsMaterial(cert: string, key: string): void {
  Deno.listenTls({ hostname: "127.0.0.1", port: 0, cert, key }).close();
}

/** When a TLS listener accepted the TCP socket under a TLS socket (`performance.now()`). */
const ACCEPTED_AT = Symbol("acceptedAt");
type TimedSocket = net.Socket & { [ACCEPTED_AT]?: number };

/**
 * Binds a TLS listener (node:tls). The connect deadline includes the handshake: node:tls
 * drops a handshake that takes longer than `handshakeTimeoutMs`, and the connection's own
 * deadline then runs from the TCP accept, not from the end of the handshake. (Deno's
 * `listenTls` could not do this: closing a `TlsConn` whose handshake is in progress left the
 * TCP socket open until the peer went, denoland/deno#14547, so a trickled ClientHello held a
 * socket forever.) A certificate reload swaps the secure context for new handshakes;
 * connections already open are not touched. Rejects with an OperatorError naming the address
 * when it cannot be bound or when the certificate or key is not usable PEM (`o.source` says
 * where they came from).
 */
export function listenTls(
  hostname: string,
  port: number,
  cert: string,
  key: string,
  o: TlsListenOptions,
  onAccept: AcceptHandler,
): Promise<MqttListener> {
  try {
    proveTlsMaterial(cert, key);
  } catch (err) {
    const where = `MQTT TLS listener ${formatAddress(hostname, port)}`;
    const msg = `${where}: unusable certificate or key (${(err as Error).message})`;
    const error = new OperatorError("invalid_file", msg + (o.source ? ` in ${o.source}` : ""), {
      cause: err,
    });
    return Promise.reject(error);
  }
  // node:tls only when a TLS listener is configured: its modules are RSS a plain-TCP gateway
  // would carry for nothing.
  return import("node:tls").then(({ default: tls }) => {
    const server = tlsServer(tls, cert, key, o, onAccept);
    return bindTls(server, hostname, port);
  });
}

/** Binds the TLS server; reloads swap its secure context. */
function bindTls(server: tls.Server, hostname: string, port: number): Promise<MqttListener> {
  return bind(server, "MQTT TLS listener", hostname, port).then((a) => ({
    kind: "tls",
    layer: "node",
    hostname: a.address,
    port: a.port,
    close: () => server.close(),
    reloadTls(newCert: string, newKey: string) {
      proveTlsMaterial(newCert, newKey); // a bad pair throws here: the old one stays
      server.setSecureContext({ cert: newCert, key: newKey, minVersion: "TLSv1.2" });
      return Promise.resolve();
    },
  }));
}

/** The node:tls server: bounded handshakes, accept time kept, failed handshakes dropped. */
function tlsServer(
  tls: typeof import("node:tls"),
  cert: string,
  key: string,
  o: TlsListenOptions,
  onAccept: AcceptHandler,
): tls.Server {
  const server = tls.createServer({
    cert,
    key,
    minVersion: "TLSv1.2",
    ALPNProtocols: ["mqtt"],
    handshakeTimeout: o.handshakeTimeoutMs,
  });
  // Sockets still in their handshake hold no connection slot yet: this bounds them too.
  server.maxConnections = o.maxConnections;
  server.on("connection", (raw: TimedSocket) => {
    raw[ACCEPTED_AT] = performance.now();
    raw.setNoDelay(true);
  });
  server.on("secureConnection", (socket: tls.TLSSocket) => {
    // node:tls keeps the TCP socket under the TLS one as `_parent` (not typed).
    const raw = (socket as unknown as { _parent?: TimedSocket })._parent;
    onAccept(new NodeSocketTransport(socket, raw?.[ACCEPTED_AT]));
  });
  // A failed or timed-out handshake: the socket must go now (Deno's node:tls leaves it open).
  server.on("tlsClientError", (err: Error, socket: tls.TLSSocket) => {
    socket.destroy();
    o.onHandshakeFailed(/timeout/i.test(err.message));
  });
  return server;
}
