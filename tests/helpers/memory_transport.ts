/**
 * An in-memory {@link Transport} pair, so session logic runs without sockets (unit tests):
 * the gateway side is a `Transport`, the client side sends bytes and reads whole MQTT packets.
 * It keeps a socket's observable rules: reads are delivered asynchronously, in order, never
 * while paused; a closed transport delivers nothing more.
 *
 * @module
 */
import type { Transport, TransportSink } from "../../src/session/transport.ts";

/** The gateway's end of a memory pair. */
class MemoryServerEnd implements Transport {
  readonly remoteAddress: string;
  /** Bytes the client sent, not yet delivered. */
  readonly inbound: Uint8Array[] = [];
  /** Bytes the gateway wrote, not yet read by the client. */
  outbound: Uint8Array = new Uint8Array(0);
  sink: TransportSink | null = null;
  paused = false;
  closed = false;
  /** The client ended its side (after what it sent was delivered). */
  inputEnded = false;
  #pumping = false;
  #ended = false;
  /** Wakes the client's readers (a write or close happened). */
  onOutput: () => void = () => {};

  constructor(remoteAddress: string) {
    this.remoteAddress = remoteAddress;
  }

  start(sink: TransportSink): void {
    this.sink = sink;
    this.pump();
  }

  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
    this.pump();
  }

  write(bytes: Uint8Array): Promise<number> {
    if (this.closed) return Promise.reject(new Error("Cannot write: memory transport closed"));
    const next = new Uint8Array(this.outbound.length + bytes.length);
    next.set(this.outbound);
    next.set(bytes, this.outbound.length);
    this.outbound = next;
    this.onOutput();
    return Promise.resolve(bytes.length);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.onOutput();
  }

  /** Delivers what is queued, one chunk per microtask, like a socket's data events. */
  pump(): void {
    if (this.#pumping) return;
    this.#pumping = true;
    queueMicrotask(() => {
      this.#pumping = false;
      if (this.sink === null || this.closed || this.paused) return;
      const chunk = this.inbound.shift();
      if (chunk !== undefined) {
        this.sink.data(chunk);
        if (this.inbound.length > 0 || this.inputEnded) this.pump();
      } else if (this.inputEnded && !this.#ended) {
        this.#ended = true;
        this.sink.end();
      }
    });
  }
}

/** The client's end of a memory pair. */
export class MemoryClient {
  readonly #server: MemoryServerEnd;
  #waiters: (() => void)[] = [];

  constructor(server: MemoryServerEnd) {
    this.#server = server;
    server.onOutput = () => {
      const w = this.#waiters;
      this.#waiters = [];
      for (const r of w) r();
    };
  }

  /** The gateway closed the connection. */
  get closed(): boolean {
    return this.#server.closed;
  }

  /** Sends bytes to the gateway (copied: the caller may reuse them). */
  send(bytes: Uint8Array | readonly number[]): void {
    this.#server.inbound.push(Uint8Array.from(bytes));
    this.#server.pump();
  }

  /** Ends the client's side, like a socket's FIN after what was sent. */
  end(): void {
    this.#server.inputEnded = true;
    this.#server.pump();
  }

  /**
   * The next whole MQTT packet the gateway wrote; null when the gateway closed the connection
   * with nothing more written. Rejects after `timeoutMs` so a missing answer fails the test.
   */
  async readPacket(timeoutMs = 2000): Promise<Uint8Array | null> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const n = packetLength(this.#server.outbound);
      if (n > 0) {
        const packet = this.#server.outbound.slice(0, n);
        this.#server.outbound = this.#server.outbound.slice(n);
        return packet;
      }
      if (this.#server.closed) return null;
      await this.#output(deadline - performance.now());
    }
  }

  /** Resolves once the gateway has closed the connection (rejects after `timeoutMs`). */
  async closedByGateway(timeoutMs = 2000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (!this.#server.closed) await this.#output(deadline - performance.now());
  }

  #output(leftMs: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (leftMs <= 0) return reject(new Error("Memory transport: no output in time"));
      const timer = setTimeout(
        () => reject(new Error(`Memory transport: no output within the timeout`)),
        leftMs,
      );
      this.#waiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}

/** Length of the whole packet at the start of `b`, or 0 when it is not complete yet. */
function packetLength(b: Uint8Array): number {
  let remaining = 0;
  let mult = 1;
  for (let i = 1; i < 5 && i < b.length; i++) {
    remaining += (b[i] & 0x7f) * mult;
    if ((b[i] & 0x80) === 0) return b.length >= i + 1 + remaining ? i + 1 + remaining : 0;
    mult *= 128;
  }
  return 0;
}

/** A connected pair: hand `transport` to the gateway, drive the session through `client`. */
export function memoryTransportPair(
  remoteAddress = "127.0.0.1",
): { readonly transport: Transport; readonly client: MemoryClient } {
  const server = new MemoryServerEnd(remoteAddress);
  return { transport: server, client: new MemoryClient(server) };
}
