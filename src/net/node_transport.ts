/**
 * node:net and node:tls sockets as push {@link Transport}s, and binding a node:net or node:tls
 * server with one-line errors.
 *
 * @module
 */
import type net from "node:net";
import { bindError } from "./bind_error.ts";
import type { Transport, TransportSink } from "../session/transport.ts";

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
 * only when bytes arrive, so an idle socket holds no read promise or buffer: less RSS per idle
 * socket than `Deno.listen` with a pending read.
 */
export class NodeSocketTransport implements Transport {
  readonly remoteAddress: string;
  readonly acceptedAt: number | undefined;
  readonly certificateName: string | undefined;
  readonly #socket: SinkedSocket;

  /** `remoteAddress`: the client's, when a PROXY header named it; else the socket's peer. */
  constructor(
    socket: net.Socket,
    acceptedAt?: number,
    certificateName?: string,
    remoteAddress?: string,
  ) {
    this.#socket = socket;
    this.remoteAddress = remoteAddress ?? plainAddress(socket.remoteAddress ?? "");
    this.acceptedAt = acceptedAt;
    this.certificateName = certificateName;
  }

  /** A getter, so an idle connection holds no more for it. */
  get listener(): string {
    return (this.#socket as { encrypted?: boolean }).encrypted === true ? "tls" : "tcp";
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
export function plainAddress(address: string): string {
  return address.startsWith("::ffff:") && address.includes(".") ? address.slice(7) : address;
}

/** Listens on host:port; rejects with an OperatorError naming `what` and the address. */
export function bind(
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
