/**
 * MQTT over WebSocket (`listeners.ws`): Deno's own HTTP server answers the upgrade on
 * `listeners.ws_path` with the subprotocol `mqtt` and hands each WebSocket to the gateway as a
 * {@link Transport}, so a browser dashboard gets the same auth, ACL, limits, keep-alive and wills
 * as a TCP client. Binary frames carry the MQTT byte stream: a packet may span frames and a frame
 * may hold several packets (the decoder sees one stream). A text frame closes the connection
 * (MQTT over WebSocket is binary only [MQTT-6.0.0-1]).
 *
 * Frames are handed to the connection once per tick, joined. A WebSocket cannot be paused:
 * frames that arrive while the connection is paused are held, up to {@link MAX_HELD_BYTES}; a
 * client that sends more while its connection waits is closed.
 *
 * @module
 */
import type { Transport, TransportSink } from "../session/transport.ts";
import type { AcceptHandler, MqttListener, TlsMaterial } from "./mqtt_listener.ts";
import { bindError } from "./bind_error.ts";
import { nextTick } from "../base/tick.ts";
import { ProtocolError } from "../codec/errors.ts";
import type { IpBlockSet } from "../base/ip.ts";
// A type-only import: `deno run` does not load the module for it.
import type * as ForwardedFor from "./forwarded_for.ts";

/** Bytes held for a paused connection before it is closed. */
export const MAX_HELD_BYTES = 4 * 1024 * 1024;

/** What the WebSocket listener is configured with. */
export interface WsListenOptions {
  readonly path: string;
  /** Origins a browser may connect from; empty: every origin (and clients sending none). */
  readonly allowedOrigins: readonly string[];
  /** An upgrade was refused (wrong path, no `mqtt` subprotocol, origin not allowed). */
  readonly onRefused?: (reason: string, remote: string) => void;
  /** Serve `wss` with this certificate and key (PEM). */
  readonly tls?: { readonly cert: string; readonly key: string };
  /** Proxies whose `X-Forwarded-For` names the client (`listeners.proxy_protocol_from`). */
  readonly proxies?: IpBlockSet;
}

/** One WebSocket as a transport. */
export class WsTransport implements Transport {
  readonly remoteAddress: string;
  readonly listener: "ws" | "wss";
  readonly #socket: WebSocket;
  #sink: TransportSink | null = null;
  #paused = false;
  #held: Uint8Array[] = [];
  #heldBytes = 0;
  #ended = false;
  #scheduled = false;

  constructor(socket: WebSocket, remoteAddress: string, listener: "ws" | "wss" = "ws") {
    this.#socket = socket;
    this.remoteAddress = remoteAddress;
    this.listener = listener;
    socket.binaryType = "arraybuffer";
    socket.onmessage = (e) => this.#message(e.data);
    socket.onclose = () => this.#end();
    socket.onerror = (e) => this.#end(wsError(e));
  }

  start(sink: TransportSink): void {
    this.#sink = sink;
    this.#drain();
  }

  pause(): void {
    this.#paused = true;
  }

  resume(): void {
    this.#paused = false;
    this.#drain();
  }

  write(bytes: Uint8Array): Promise<number> {
    // send() copies the bytes into its frame; a closed socket drops them (the close is coming).
    if (this.#socket.readyState === WebSocket.OPEN) this.#socket.send(bytes);
    return Promise.resolve(bytes.length);
  }

  close(): void {
    try {
      this.#socket.close();
    } catch {
      // already closed
    }
  }

  /**
   * A frame: kept until the end of the tick, when every frame of the tick goes to the connection
   * as one read. A client such as MQTT.js sends each packet in a frame of its own, and the
   * connection makes one append per read: frame by frame, a QoS 1 flood over WebSocket made
   * an append per packet where TCP makes one per read.
   */
  #message(data: unknown): void {
    if (this.#ended) return;
    if (!(data instanceof ArrayBuffer)) {
      this.#socket.close(1003, "binary frames only"); // before the connection closes it plainly
      this.#end(
        new ProtocolError("MQTT-6.0.0-1", "text frame: MQTT over WebSocket is binary only"),
      );
      return;
    }
    this.#held.push(new Uint8Array(data));
    this.#heldBytes += data.byteLength;
    if (this.#paused && this.#heldBytes > MAX_HELD_BYTES) {
      this.#socket.close(1008, "too much data while held back");
      this.#end(new Error("sent more than 4 MiB while its connection was held back"));
      return;
    }
    if (this.#scheduled || this.#paused) return;
    this.#scheduled = true;
    nextTick(() => {
      this.#scheduled = false;
      this.#drain();
    });
  }

  /** Hands every frame held to the connection as one read (unless paused or not started). */
  #drain(): void {
    if (this.#sink === null || this.#paused || this.#held.length === 0 || this.#ended) return;
    const held = this.#held;
    let chunk = held[0];
    if (held.length > 1) {
      chunk = new Uint8Array(this.#heldBytes);
      let at = 0;
      for (const c of held) {
        chunk.set(c, at);
        at += c.length;
      }
    }
    this.#held = [];
    this.#heldBytes = 0;
    this.#sink.data(chunk);
  }

  #end(error?: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#held = [];
    this.#heldBytes = 0;
    this.#sink?.end(error);
  }
}

/** The peer went away mid-frame or the socket failed: not a violation by the client. */
const GONE = /unexpected eof|reset|broken pipe|closed|timed out/i;

/**
 * A WebSocket's error as the connection counts it: a frame that breaks RFC 6455 (reserved bits,
 * an unknown opcode, a fragmented or oversized control frame, invalid UTF-8 in a close, a
 * frame over the size bound) is the client's protocol violation, counted and logged as one
 * (`protocol_errors{rule="RFC6455"}`); a socket that went away is not.
 */
export function wsError(e: Event): unknown {
  const error = (e as ErrorEvent).error ??
    new Error((e as ErrorEvent).message || "WebSocket error");
  const message = error instanceof Error ? error.message : String(error);
  if (GONE.test(message)) return error;
  return new ProtocolError("RFC6455", `WebSocket: ${message}`);
}

/** Why an upgrade request is refused (status and text), or null to accept it. */
export function refusal(req: Request, o: WsListenOptions): [number, string] | null {
  const url = new URL(req.url);
  if (url.pathname !== o.path) return [404, `MQTT over WebSocket is served on ${o.path}`];
  if (req.headers.get("upgrade")?.toLowerCase() !== "websocket") {
    return [426, "MQTT over WebSocket: this path takes WebSocket upgrades only"];
  }
  const protocols = (req.headers.get("sec-websocket-protocol") ?? "").split(",").map((p) =>
    p.trim()
  );
  if (!protocols.includes("mqtt")) {
    return [400, 'MQTT over WebSocket needs the subprotocol "mqtt" (Sec-WebSocket-Protocol)'];
  }
  const origin = req.headers.get("origin");
  if (o.allowedOrigins.length > 0 && (origin === null || !o.allowedOrigins.includes(origin))) {
    return [403, `origin ${origin ?? "(none)"} is not in listeners.ws_allowed_origins`];
  }
  return null;
}

/**
 * Binds the WebSocket listener; rejects with an OperatorError naming the address. A `wss`
 * listener reloads its certificate and key with the TLS listener, but Deno's HTTP server can
 * neither swap them nor stop accepting without closing its upgraded WebSockets (and shares a
 * port only under `--unstable-net`): a reload with a new pair proves it, stops the old server,
 * which closes the open `wss` connections (their clients reconnect, stored sessions resume), and
 * binds the port again with the new pair. A reload with the same pair leaves the server and its
 * connections alone. A pair that does not load is refused, the old server untouched.
 */
export async function listenWs(
  hostname: string,
  port: number,
  o: WsListenOptions,
  onAccept: AcceptHandler,
): Promise<MqttListener> {
  const kind = o.tls ? "wss" : "ws";
  let server: Deno.HttpServer<Deno.NetAddr>;
  let bound: number;
  try {
    [server, bound] = await serveWs(hostname, port, o, onAccept);
  } catch (err) {
    throw bindError(o.tls ? "listeners.wss" : "listeners.ws", hostname, port, err);
  }
  const listener: MqttListener = {
    kind,
    layer: "deno",
    hostname,
    port: bound,
    close: () => void server.shutdown(),
  };
  if (!o.tls) return listener;
  let serving = o.tls; // the pair the server runs with now
  return {
    ...listener,
    async reloadTls(next: TlsMaterial) {
      // Unchanged (a reload for the map or users): the open connections stay.
      if (next.cert === serving.cert && next.key === serving.key) return;
      const tls = { cert: next.cert, key: next.key };
      Deno.listenTls({ hostname: "127.0.0.1", port: 0, ...tls }).close(); // throws on a bad pair
      await server.shutdown();
      try {
        [server] = await serveWs(hostname, bound, { ...o, tls }, onAccept);
        serving = tls;
      } catch (err) {
        // The port was taken in between: serve on with the pair it had if it still binds.
        [server] = await serveWs(hostname, bound, { ...o, tls: serving }, onAccept);
        throw err;
      }
    },
  };
}

/** One Deno HTTP server answering MQTT upgrades, and the port it bound. */
async function serveWs(
  hostname: string,
  port: number,
  o: WsListenOptions,
  onAccept: AcceptHandler,
): Promise<[Deno.HttpServer<Deno.NetAddr>, number]> {
  // The X-Forwarded-For reader only with `listeners.proxy_protocol_from`, from a URL built at
  // run time: `deno run` keeps the source of every module a literal import names.
  const forwarded: typeof ForwardedFor | null = o.proxies === undefined
    ? null
    : await import(new URL("./forwarded_for.ts", import.meta.url).href);
  const ready = Promise.withResolvers<number>();
  const server = Deno.serve({
    hostname,
    port,
    onListen: (a) => ready.resolve(a.port),
    ...(o.tls ?? {}),
  }, (req, info) => {
    const peer = info.remoteAddr.hostname; // read before the upgrade takes the request
    const client = forwarded === null
      ? { address: peer }
      : forwarded.forwardedClient(req.headers.get("x-forwarded-for"), peer, o.proxies!);
    if ("refused" in client) {
      o.onRefused?.(client.refused, peer);
      return new Response(client.refused + "\n", { status: 400 });
    }
    const remote = client.address;
    let upgraded: { socket: WebSocket; response: Response };
    try {
      const refused = refusal(req, o);
      if (refused !== null) {
        o.onRefused?.(refused[1], remote);
        return new Response(refused[1] + "\n", { status: refused[0] });
      }
      upgraded = Deno.upgradeWebSocket(req, { protocol: "mqtt" });
    } catch (e) {
      // A request the URL parser or the upgrade refuses (a Host that is no host, no
      // Sec-WebSocket-Key, another version): the client's fault, refused like the others;
      // thrown, Deno's server printed a stack trace and answered 500.
      const why = `MQTT over WebSocket: bad upgrade request: ${(e as Error).message}`;
      o.onRefused?.(why, remote);
      return new Response(why + "\n", { status: 400 });
    }
    const { socket, response } = upgraded;
    const t = new WsTransport(socket, remote, o.tls === undefined ? "ws" : "wss");
    socket.addEventListener("open", () => onAccept(t), { once: true });
    return response;
  });
  return [server, await ready.promise];
}
