/**
 * One load-generator connection: a read loop that hands PUBLISH and PUBACK to hot-path
 * callbacks and everything else to one-shot waiters (CONNACK is handled by `connectMqtt`).
 *
 * @module
 */
import {
  connectMqtt,
  encodePublish,
  encodeSubscribe,
  type OnPacket,
  PINGREQ,
  PT,
  readPackets,
  writeAll,
} from "./_mqtt.ts";

/** A connected client with its read loop running. */
export class Link {
  readonly conn: Deno.TcpConn;
  onPublish: OnPacket | null = null;
  onPuback: ((id: number) => void) | null = null;
  /** Runs once per read chunk, after its packets: coalesce replies here. */
  afterChunk: (() => Promise<void> | void) | null = null;
  readonly done: Promise<void>;
  #waiters: { type: number; resolve: (code: number) => void }[] = [];

  constructor(conn: Deno.TcpConn) {
    this.conn = conn;
    this.done = readPackets(conn, (first, buf, body, end) => {
      const t = first >> 4;
      if (t === PT.PUBLISH && this.onPublish) return this.onPublish(first, buf, body, end);
      if (t === PT.PUBACK && this.onPuback) {
        return this.onPuback((buf[body] << 8) | buf[body + 1]);
      }
      const i = this.#waiters.findIndex((w) => w.type === t);
      if (i >= 0) this.#waiters.splice(i, 1)[0].resolve(t === PT.SUBACK ? buf[end - 1] : 0);
    }, () => this.afterChunk?.());
  }

  /** Connects and starts reading. */
  static async open(port: number, clientId: string, keepAliveS = 600): Promise<Link> {
    return new Link(await connectMqtt(port, clientId, keepAliveS));
  }

  /** Resolves on the next packet of `type` (SUBACK: with its return code). */
  next(type: number): Promise<number> {
    return new Promise((resolve) => this.#waiters.push({ type, resolve }));
  }

  /** PINGREQ → PINGRESP: the server has processed everything this link sent before. */
  async barrier(): Promise<void> {
    const p = this.next(PT.PINGRESP);
    await writeAll(this.conn, PINGREQ);
    await p;
  }

  /** One QoS 1 PUBLISH awaited to its PUBACK (creates the target topic where a server needs it). */
  async prime(topic: string): Promise<void> {
    const p = this.next(PT.PUBACK);
    await writeAll(this.conn, encodePublish(topic, new Uint8Array(16), 1, 1).bytes);
    await p;
  }

  /** SUBSCRIBE and await SUBACK; throws when refused. */
  async subscribe(topic: string, qos: number): Promise<void> {
    const p = this.next(PT.SUBACK);
    await writeAll(this.conn, encodeSubscribe(1, topic, qos));
    const code = await p;
    if (code === 0x80) throw new Error(`SUBSCRIBE to "${topic}" refused`);
  }

  close(): void {
    try {
      this.conn.close();
    } catch {
      // already closed
    }
  }
}

/** Opens `n` links, `concurrency` at a time. */
export async function openMany(
  port: number,
  n: number,
  prefix: string,
  concurrency = 100,
): Promise<Link[]> {
  const links: Link[] = new Array(n);
  let next = 0;
  async function worker() {
    while (next < n) {
      const i = next++;
      links[i] = await Link.open(port, `${prefix}-${i}`);
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, worker));
  return links;
}
