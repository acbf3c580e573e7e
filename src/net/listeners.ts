/**
 * The only code that touches sockets for MQTT over TCP: the epoll layer (libc through FFI) or
 * node:net, handing every accepted connection to the gateway as a {@link Transport}. TLS is
 * `tls_listener.ts`.
 *
 * @module
 */
import { OperatorError } from "../config/errors.ts";
import type { GatewayConfig } from "../config/types.ts";
import { bindError } from "./bind_error.ts";
import { bindableIp, EpollListener } from "./_epoll_listener.ts";
import { addressOf, openLibc, sockaddrOf } from "./_libc.ts";
import type { AcceptHandler, MqttListener } from "./mqtt_listener.ts";
import { bind, NodeSocketTransport } from "./node_transport.ts";
import type { ProxyOptions } from "./proxy_transport.ts";
// A type-only import: `deno run` does not load the module for it.
import type * as ProxyTransport from "./proxy_transport.ts";

export type { AcceptHandler, MqttListener, TlsMaterial } from "./mqtt_listener.ts";

/** `listeners.tcp_socket_layer`. */
export type TcpSocketLayer = GatewayConfig["listeners"]["tcp_socket_layer"];

/** How the TCP listener is driven, and what it reports. */
export interface TcpListenOptions {
  /** `auto`: epoll where libc can be used (Linux, `--allow-ffi`), node:net otherwise. */
  readonly layer: TcpSocketLayer;
  /** `auto` fell back to node:net; `reason` says why (one log line). */
  onFallback(reason: string): void;
  /** A connection was closed at once for want of file descriptors (epoll layer). */
  onShed(): void;
  /** The PROXY protocol (`listeners.proxy_protocol_from`), when any source may send it. */
  readonly proxy?: ProxyOptions;
}

/**
 * Binds a TCP listener: epoll (memory per idle connection is only the gateway's own objects,
 * less than what node:net holds per idle socket) or node:net (see
 * {@link NodeSocketTransport}). Rejects with an OperatorError naming the address when it
 * cannot be bound (port in use, not ours, privileged), or naming the key when `epoll` was
 * asked for and cannot be used. With `o.proxy`, every connection passes a {@link ProxyAcceptor}
 * first, whichever layer accepted it.
 */
export async function listenTcp(
  hostname: string,
  port: number,
  o: TcpListenOptions,
  accept: AcceptHandler,
): Promise<MqttListener> {
  // The PROXY code only with `listeners.proxy_protocol_from`, from a URL built at run time:
  // `deno run` keeps the source of every module a literal import names.
  const proxy: typeof ProxyTransport | null = o.proxy === undefined
    ? null
    : await import(new URL("./proxy_transport.ts", import.meta.url).href);
  const onAccept = o.proxy === undefined
    ? accept
    : new proxy!.ProxyAcceptor(o.proxy, accept).accept;
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
