/**
 * The only code that touches sockets for MQTT over TCP: the epoll layer (libc through FFI) or
 * node:net, handing every accepted connection to the gateway as a {@link Transport}. TLS is
 * `tls_listener.ts`.
 *
 * @module
 */
import { OperatorError } from "../config/errors.ts";
import type { GatewayConfig } from "../config/types.ts";
import type { AcceptHandler, MqttListener } from "./mqtt_listener.ts";
import { bind, NodeSocketTransport } from "./node_transport.ts";
import type { ProxyOptions } from "./proxy_transport.ts";
// Type-only imports: `deno run` does not load the modules for them.
import type * as ProxyTransport from "./proxy_transport.ts";
import type * as EpollTcp from "./epoll_tcp.ts";

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
    const barred = epollBarred();
    const epoll: typeof EpollTcp | null = barred !== null
      ? null
      : await import(new URL("./epoll_tcp.ts", import.meta.url).href);
    const bound = epoll === null
      ? { reason: barred! }
      : await epoll.listenEpoll(hostname, port, o.onShed, onAccept);
    if (!("reason" in bound)) return bound;
    if (o.layer === "epoll") {
      const msg = `listeners.tcp_socket_layer = "epoll" cannot be used: ${bound.reason}`;
      return Promise.reject(new OperatorError("not_capable", msg));
    }
    o.onFallback(bound.reason);
  }
  return listenNode(hostname, port, onAccept);
}

/**
 * Why the epoll layer cannot be used, asked before its code is loaded (from a URL built at run
 * time: `deno run` keeps the source of every module a literal import names): another OS than
 * Linux, FFI not granted. Null when it may be tried.
 */
function epollBarred(): string | null {
  if (Deno.build.os !== "linux") return `not Linux (${Deno.build.os})`;
  // Asked first: an interactive `deno run` would otherwise prompt for the permission.
  if (Deno.permissions.querySync({ name: "ffi" }).state === "granted") return null;
  return 'FFI is not permitted; run under the permission set "gateway-epoll" (deno task start:epoll, or the -epoll build)';
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
