/**
 * Helpers shared by the way-out end-to-end tests (subscribe, offsets, restart, slow
 * consumers): raw SUBSCRIBE/UNSUBSCRIBE/PUBACK packets, PUBLISH parsing, offsets.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  connectPacket,
  connectRaw,
  pingBarrier,
  publishPacket,
  type RawClient,
  subscribePacket,
  type TestGateway,
  varint,
  waitFor,
} from "../helpers/gateway.ts";
import type { MqttClient } from "mqtt";
import { partitionForKey } from "../../src/mapping/mod.ts";
import type { PartitionAddress } from "../../src/log/port.ts";

/** Test options: sanitizers on, since a stopped gateway leaves no timers or sockets behind. */
export const opts = {};

const dec = new TextDecoder();

/** A PUBLISH as the subscriber received it. */
export interface Received {
  readonly topic: string;
  readonly payload: string;
  readonly qos: number;
  readonly dup: boolean;
  readonly packetId: number;
}

/** Parses a whole PUBLISH packet (fixed header included). */
export function parsePublish(p: Uint8Array): Received {
  assert.equal(p[0] >> 4, 3, `PUBLISH expected, got type ${p[0] >> 4}`);
  const qos = (p[0] >> 1) & 3;
  let at = 1;
  while (p[at] & 0x80) at++;
  at++;
  const tlen = (p[at] << 8) | p[at + 1];
  const topic = dec.decode(p.subarray(at + 2, at + 2 + tlen));
  at += 2 + tlen;
  let packetId = 0;
  if (qos > 0) {
    packetId = (p[at] << 8) | p[at + 1];
    at += 2;
  }
  return { topic, payload: dec.decode(p.subarray(at)), qos, dup: (p[0] & 8) !== 0, packetId };
}

/** PUBACK bytes. */
export function puback(id: number): Uint8Array {
  return new Uint8Array([0x40, 2, id >> 8, id & 0xff]);
}

/** UNSUBSCRIBE bytes. */
export function unsubscribePacket(id: number, filters: string[]): Uint8Array {
  const enc = new TextEncoder();
  const body = [id >> 8, id & 0xff];
  for (const f of filters) {
    const b = enc.encode(f);
    body.push(b.length >> 8, b.length & 0xff, ...b);
  }
  return new Uint8Array([0xa2, ...varint(body.length), ...body]);
}

/**
 * PUBLISHes read while waiting for a SUBACK: the server may send matching PUBLISHes before
 * the SUBACK (MQTT 3.1.1 §3.8.4), so they are kept for {@link receive} / {@link publishesBefore}.
 */
const early = new WeakMap<RawClient, Uint8Array[]>();

function takeEarly(c: RawClient): Uint8Array[] {
  const e = early.get(c) ?? [];
  early.delete(c);
  return e;
}

/** Sends SUBSCRIBE and returns the SUBACK return codes. */
export async function subscribe(
  c: RawClient,
  filters: [string, number][],
  id = 1,
): Promise<number[]> {
  await c.send(subscribePacket(id, filters));
  for (;;) {
    const p = await c.readPacket();
    assert.ok(p !== null, "connection closed before SUBACK");
    if (p[0] >> 4 === 3) {
      if (!early.has(c)) early.set(c, []);
      early.get(c)!.push(p);
    }
    if (p[0] !== 0x90) continue;
    assert.equal((p[2] << 8) | p[3], id, "SUBACK packet id");
    return [...p.subarray(4)];
  }
}

/** Connects a raw client and subscribes it; returns the client. */
export async function rawSubscriber(
  port: number,
  clientId: string,
  filters: [string, number][],
): Promise<RawClient> {
  const c = await connectRaw(port, clientId);
  const codes = await subscribe(c, filters);
  assert.deepEqual(codes, filters.map(([, q]) => Math.min(q, 1)), `SUBACK of ${clientId}`);
  return c;
}

/** Publishes through a raw connection and waits for the PUBACKs (QoS 1: appended). */
export async function publishAll(
  c: RawClient,
  msgs: [string, string][],
  firstId = 1,
): Promise<void> {
  let id = firstId;
  const packets = msgs.map(([t, p]) => publishPacket(t, p, 1, id++));
  // One write: the gateway appends what one read brings as one batch.
  const all = new Uint8Array(packets.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of packets) {
    all.set(p, at);
    at += p.length;
  }
  await c.send(all);
  let acks = 0;
  while (acks < msgs.length) {
    const p = await c.readPacket();
    assert.ok(p !== null, "publisher closed before its PUBACKs");
    if (p[0] === 0x40) acks++;
  }
}

/**
 * Reads PUBLISHes until `n` arrived (or fails after the timeout). PUBACKs each QoS 1 copy
 * when `ack` is true.
 */
export async function receive(
  c: RawClient,
  n: number,
  o: { ack?: boolean; timeoutMs?: number } = {},
): Promise<Received[]> {
  const out: Received[] = [];
  const kept = takeEarly(c);
  while (out.length < n) {
    const p = kept.shift() ?? await c.readPacket(o.timeoutMs ?? 5000);
    assert.ok(p !== null, `expected ${n} PUBLISHes, got ${out.length} before close/timeout`);
    if (p[0] >> 4 !== 3) continue;
    const r = parsePublish(p);
    out.push(r);
    if (o.ack !== false && r.qos === 1) await c.send(puback(r.packetId));
  }
  if (kept.length > 0) early.set(c, kept);
  return out;
}

/** PINGREQ barrier: every PUBLISH the gateway sent before the PINGRESP (nothing else). */
export async function publishesBefore(c: RawClient): Promise<Received[]> {
  const kept = takeEarly(c);
  return [...kept, ...await pingBarrier(c)].filter((p) => p[0] >> 4 === 3).map(parsePublish);
}

/**
 * PINGREQ barrier for an MQTT.js client: resolves at its PINGRESP (or, with `orClose`, when the
 * gateway closes the connection first). MQTT.js handles packets in order, so every packet the
 * gateway wrote to this client before has been handled by then ("packetreceive", "message").
 */
export async function mqttjsPing(
  c: MqttClient,
  o: { timeoutMs?: number; orClose?: boolean } = {},
): Promise<void> {
  let done = false;
  const onPacket = (p: { cmd: string }) => {
    if (p.cmd === "pingresp") done = true;
  };
  const onClose = () => {
    if (o.orClose) done = true;
  };
  c.on("packetreceive", onPacket);
  c.on("close", onClose);
  try {
    if (c.connected) c.sendPing();
    else onClose();
    await waitFor(() => done, o.timeoutMs ?? 5000, "the PINGRESP of an MQTT.js client");
  } finally {
    c.off("packetreceive", onPacket);
    c.off("close", onClose);
  }
}

/** The triple of a keyed topic of the design map (3 partitions with auto_create). */
export function tripleOf(
  stream: string,
  topic: string,
  key: string,
  partitions = 3,
): PartitionAddress {
  return { stream, topic, partition: partitionForKey(key, partitions) };
}

/** The stored offset of this gateway's consumer on a triple. */
export function storedOffset(gw: TestGateway, t: PartitionAddress): Promise<number | null> {
  return gw.view.log.getOffset(`mqtt-gateway-${gw.config.gateway.id}`, t);
}

/** Reads a counter from the metrics registry by its Prometheus name (sum over labels). */
export function counter(gw: TestGateway, name: string): number {
  const text = gw.view.prometheus();
  let sum = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    const m = line.match(/^([a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$/);
    if (m && m[1] === name) sum += Number(m[3]);
  }
  return sum;
}

/**
 * A lean subscriber for load tests: one read loop that parses every packet of a chunk and
 * answers all its PUBACKs in one write (a RawClient reads byte by byte, too slow for 100).
 */
export class FastSubscriber {
  /** PUBLISHes received. */
  received = 0;
  /** Payload of the last PUBLISH received. */
  last = "";
  closed = false;
  #conn: Deno.TcpConn;
  #buf = new Uint8Array(0);
  #suback: (() => void) | null = null;
  done: Promise<void>;

  private constructor(conn: Deno.TcpConn) {
    this.#conn = conn;
    this.done = this.#loop();
  }

  /** Connects, subscribes (QoS 1) and resolves after the SUBACK. */
  static async start(port: number, clientId: string, topic: string): Promise<FastSubscriber> {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    const s = new FastSubscriber(conn);
    const acked = new Promise<void>((r) => s.#suback = r);
    await s.#write(connectPacket(clientId));
    await s.#write(subscribePacket(1, [[topic, 1]]));
    await acked;
    return s;
  }

  close(): void {
    try {
      this.#conn.close();
    } catch { /* closed */ }
  }

  async #write(b: Uint8Array): Promise<void> {
    let off = 0;
    while (off < b.length) off += await this.#conn.write(b.subarray(off));
  }

  async #loop(): Promise<void> {
    const chunk = new Uint8Array(256 * 1024);
    try {
      for (;;) {
        const n = await this.#conn.read(chunk);
        if (n === null) break;
        const merged = new Uint8Array(this.#buf.length + n);
        merged.set(this.#buf);
        merged.set(chunk.subarray(0, n), this.#buf.length);
        const acks: number[] = [];
        let at = 0;
        for (;;) {
          if (merged.length - at < 2) break;
          let len = 0;
          let mult = 1;
          let i = at + 1;
          let complete = false;
          while (i < merged.length) {
            len += (merged[i] & 0x7f) * mult;
            mult *= 128;
            if ((merged[i++] & 0x80) === 0) {
              complete = true;
              break;
            }
          }
          if (!complete || i + len > merged.length) break;
          const type = merged[at] >> 4;
          if (type === 3) {
            const qos = (merged[at] >> 1) & 3;
            const tlen = (merged[i] << 8) | merged[i + 1];
            let p = i + 2 + tlen;
            if (qos > 0) {
              acks.push(0x40, 2, merged[p], merged[p + 1]);
              p += 2;
            }
            this.received++;
            this.last = dec.decode(merged.subarray(p, i + len));
          } else if (type === 9) {
            this.#suback?.();
          }
          at = i + len;
        }
        this.#buf = merged.slice(at);
        if (acks.length > 0) await this.#write(new Uint8Array(acks));
      }
    } catch { /* closed */ }
    this.closed = true;
  }
}

/**
 * A subscriber that connects and subscribes, then never reads its socket again (its TCP
 * window fills) and so never PUBACKs.
 */
export async function stuckSubscriber(
  port: number,
  clientId: string,
  topic: string,
): Promise<Deno.TcpConn> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  const b = new Uint8Array([...connectPacket(clientId), ...subscribePacket(1, [[topic, 1]])]);
  let off = 0;
  while (off < b.length) off += await conn.write(b.subarray(off));
  return conn;
}
