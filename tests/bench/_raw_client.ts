/**
 * Set-up steps of the raw-socket scenarios (blocking and bounded, before any measuring): CONNECT,
 * SUBSCRIBE, a primed topic, and the one publisher the delivery scenarios share.
 *
 * @module
 */
import { encodeConnect, encodePublish, encodeSubscribe, repeat } from "./_mqtt.ts";
import { RawSocket } from "./_raw_socket.ts";

/** CONNECT and wait for CONNACK 0 (blocking, bounded). */
export function connectRaw(port: number, clientId: string): RawSocket {
  const s = RawSocket.connect(port);
  try {
    s.writeAllBlocking(encodeConnect(clientId, 600));
    const b = new Uint8Array(4);
    s.readAtLeast(b, 4);
    if (b[0] !== 0x20 || b[3] !== 0) throw new Error(`CONNACK refused: return code ${b[3]}`);
    return s;
  } catch (err) {
    s.close();
    throw new Error(`Cannot connect "${clientId}": ${(err as Error).message}`);
  }
}

/** SUBSCRIBE to one filter and wait for its SUBACK; throws when refused. */
export function subscribeRaw(s: RawSocket, filter: string, qos: number): void {
  s.writeAllBlocking(encodeSubscribe(1, filter, qos));
  const b = new Uint8Array(5);
  s.readAtLeast(b, 5);
  if (b[0] !== 0x90 || b[4] === 0x80) throw new Error(`SUBSCRIBE to "${filter}" refused`);
}

/**
 * One QoS 1 PUBLISH awaited to its PUBACK: it creates the target topic where a server needs it.
 * Its payload (1 byte) is shorter than a stamped one, so a subscriber that sees it ignores it.
 */
export function primeRaw(s: RawSocket, topic: string): void {
  s.writeAllBlocking(encodePublish(topic, new Uint8Array(1), 1, 1).bytes);
  const b = new Uint8Array(4);
  s.readAtLeast(b, 4);
  if (b[0] !== 0x40) throw new Error(`No PUBACK for the first PUBLISH to "${topic}"`);
}

/** Bytes a stamped payload starts with: sequence number (u32 BE), send time (f64 LE, ms). */
export const STAMP_BYTES = 12;

/**
 * A QoS 0 publisher writing batches of one pre-encoded PUBLISH, each copy stamped with its
 * sequence number and the send time ({@link STAMP_BYTES}) just before the write.
 */
export class RawPublisher {
  readonly sock: RawSocket;
  /** Sequence number of the next PUBLISH. */
  seq = 0;
  readonly #out: Uint8Array;
  readonly #view: DataView;
  readonly #len: number;
  readonly #payloadAt: number;
  #pendFrom = 0;
  #pendTo = 0;

  constructor(sock: RawSocket, topic: string, payload: Uint8Array, maxBatch: number) {
    if (payload.length < STAMP_BYTES) {
      throw new Error(`Payloads need at least ${STAMP_BYTES} bytes for the stamp`);
    }
    const tpl = encodePublish(topic, payload, 0);
    this.sock = sock;
    this.#out = repeat(tpl.bytes, maxBatch);
    this.#view = new DataView(this.#out.buffer);
    this.#len = tpl.bytes.length;
    this.#payloadAt = tpl.payloadAt;
  }

  /** A batch the socket has not taken whole yet is waiting (see {@link flush}). */
  get pending(): boolean {
    return this.#pendTo > this.#pendFrom;
  }

  /**
   * Stamps and writes `n` PUBLISHes (n ≤ maxBatch, nothing pending); false when the socket
   * took part of them (call {@link flush} when it is writable).
   */
  send(n: number): boolean {
    const now = performance.now();
    for (let k = 0; k < n; k++) {
      const p = k * this.#len + this.#payloadAt;
      this.#view.setUint32(p, this.seq + k, false);
      this.#view.setFloat64(p + 4, now, true);
    }
    this.seq += n;
    this.#pendFrom = 0;
    this.#pendTo = n * this.#len;
    return this.flush();
  }

  /** Writes what is pending; true when nothing is left. Throws when the server closed. */
  flush(): boolean {
    const w = this.sock.write(this.#out, this.#pendFrom, this.#pendTo);
    if (w < 0) throw new Error("Connection closed by the server under the publisher");
    this.#pendFrom += w;
    return this.#pendFrom >= this.#pendTo;
  }

  /** Reads and drops what the server sent the publisher (nothing is expected at QoS 0). */
  discardInput(scratch: Uint8Array): void {
    if (this.sock.readSome(scratch) < 0) {
      throw new Error("Connection closed by the server under the publisher");
    }
  }
}
