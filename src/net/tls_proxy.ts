/**
 * The PROXY protocol in front of the TLS listener: the header comes before the TLS handshake,
 * so a plain node:net server takes the TCP connection, reads the header off it (or, from a
 * source not trusted to send one, looks at its first read) with the same {@link ProxyPreamble}
 * as the TCP listener, puts back what followed the header and hands the socket to the TLS
 * server as a new connection. The client's address rides on the TCP socket to the transport.
 *
 * @module
 */
import type net from "node:net";
import type tls from "node:tls";
import { plainAddress } from "./node_transport.ts";
import { type ProxyOptions, ProxyPreamble } from "./proxy_transport.ts";
import { CLIENT_ADDRESS, type ProxiedSocket } from "./proxied_socket.ts";

/**
 * A node:net server that reads each connection's PROXY preamble and then hands it to
 * `secure` (`accepted` is told of each first: the connect deadline runs from then). Sockets at once, waiting or handshaking, are bounded by `maxConnections`; the
 * preamble by `o.timeoutMs` (trusted or not: an untrusted peer that sends nothing is dropped
 * too, as a handshake that never comes would be).
 */
export function proxyFront(
  netModule: typeof import("node:net"),
  secure: tls.Server,
  o: ProxyOptions,
  maxConnections: number,
  accepted: (socket: net.Socket) => void,
): net.Server {
  const server = netModule.createServer((socket) => {
    accepted(socket);
    readPreamble(socket, secure, o);
  });
  server.maxConnections = maxConnections;
  return server;
}

function readPreamble(socket: ProxiedSocket, secure: tls.Server, o: ProxyOptions): void {
  const remote = plainAddress(socket.remoteAddress ?? "");
  const trusted = o.trusted.has(remote);
  const preamble = new ProxyPreamble(trusted);
  let reading = true;
  const stop = () => {
    if (!reading) return false;
    reading = false;
    clearTimeout(timer);
    socket.off("data", onData).off("error", stop).off("close", stop);
    return true;
  };
  const timer = setTimeout(() => {
    if (!stop()) return;
    socket.destroy();
    const what = trusted ? "no whole PROXY header" : "no byte";
    o.onRefused({ why: "proxy_timeout", remote, reason: `${what} within ${o.timeoutMs} ms` });
  }, o.timeoutMs);
  const onData = (chunk: Uint8Array) => {
    const step = preamble.push(chunk);
    if (step.kind === "more") return;
    stop();
    if (step.kind === "refused") {
      socket.destroy();
      return o.onRefused({ why: step.why, remote, reason: step.reason });
    }
    socket.pause();
    if (step.source !== null) socket[CLIENT_ADDRESS] = step.source;
    if (step.rest.length > 0) socket.unshift(step.rest.slice());
    secure.emit("connection", socket);
  };
  // Gone before its preamble (a balancer's plain TCP check, a client that left): no refusal.
  socket.on("data", onData).on("error", stop).on("close", stop);
}
