/**
 * The load generator's own MQTT 3.1.1 client pieces: pre-encoded packets, whole-buffer writes,
 * and a reader that parses every complete packet of a read chunk in one pass. Deliberately
 * minimal (only what the benchmark sends and receives) so the client is never the bottleneck.
 *
 * @module
 */
import { remainingLength } from "../../src/codec/encoder.ts";

const enc = new TextEncoder();

/** MQTT control packet types (high nibble of the first byte). */
export const PT = {
  CONNACK: 2,
  PUBLISH: 3,
  PUBACK: 4,
  SUBACK: 9,
  PINGRESP: 13,
} as const;

/** PINGREQ, the barrier packet: the server answers it after everything sent before it. */
export const PINGREQ = new Uint8Array([0xc0, 0x00]);
/** DISCONNECT. */
export const DISCONNECT = new Uint8Array([0xe0, 0x00]);

function packet(first: number, body: number[] | Uint8Array): Uint8Array {
  const rl = remainingLength(body.length);
  const out = new Uint8Array(1 + rl.length + body.length);
  out[0] = first;
  out.set(rl, 1);
  out.set(body, 1 + rl.length);
  return out;
}

function str(s: string): number[] {
  const b = enc.encode(s);
  return [b.length >> 8, b.length & 0xff, ...b];
}

/** CONNECT, clean session, no credentials. */
export function encodeConnect(clientId: string, keepAliveS: number, clean = true): Uint8Array {
  return packet(0x10, [
    ...str("MQTT"),
    4,
    clean ? 0x02 : 0x00,
    keepAliveS >> 8,
    keepAliveS & 0xff,
    ...str(clientId),
  ]);
}

/** SUBSCRIBE to one exact filter. */
export function encodeSubscribe(id: number, filter: string, qos: number): Uint8Array {
  return packet(0x82, [id >> 8, id & 0xff, ...str(filter), qos]);
}

/** A PUBLISH whose packet id (QoS 1) sits at `idAt` and payload at `payloadAt`. */
export interface PublishTemplate {
  readonly bytes: Uint8Array;
  readonly idAt: number;
  readonly payloadAt: number;
}

/** Encodes one PUBLISH; patch the id and payload bytes in place to reuse it. */
export function encodePublish(
  topic: string,
  payload: Uint8Array,
  qos: 0 | 1,
  id = 1,
): PublishTemplate {
  const head = str(topic);
  if (qos === 1) head.push(id >> 8, id & 0xff);
  const body = new Uint8Array(head.length + payload.length);
  body.set(head, 0);
  body.set(payload, head.length);
  const bytes = packet(0x30 | (qos << 1), body);
  const hdr = bytes.length - body.length;
  return {
    bytes,
    idAt: qos === 1 ? hdr + head.length - 2 : -1,
    payloadAt: hdr + head.length,
  };
}

/** `n` copies of a packet back to back: one write sends them all. */
export function repeat(p: Uint8Array, n: number): Uint8Array {
  const out = new Uint8Array(p.length * n);
  for (let i = 0; i < n; i++) out.set(p, i * p.length);
  return out;
}

/** Writes all of `data` (Deno may accept part of it per call). */
export async function writeAll(conn: Deno.Conn, data: Uint8Array): Promise<void> {
  let off = 0;
  while (off < data.length) off += await conn.write(off === 0 ? data : data.subarray(off));
}

/** Called per complete packet: `first` is its first byte, `buf[body..end)` what follows the length. */
export type OnPacket = (first: number, buf: Uint8Array, body: number, end: number) => void;

/**
 * Reads a connection until it closes, parsing every complete packet of each read before the
 * next read. `afterChunk` runs once per read (the place to coalesce replies into one write).
 */
export async function readPackets(
  conn: Deno.Conn,
  onPacket: OnPacket,
  afterChunk?: () => Promise<void> | void,
): Promise<void> {
  let buf = new Uint8Array(256 * 1024);
  let end = 0;
  for (;;) {
    if (end === buf.length) {
      const bigger = new Uint8Array(buf.length * 2);
      bigger.set(buf);
      buf = bigger;
    }
    let n: number | null;
    try {
      n = await conn.read(buf.subarray(end));
    } catch {
      return;
    }
    if (n === null) return;
    end += n;
    let pos = 0;
    while (end - pos >= 2) {
      let len = 0;
      let mul = 1;
      let i = pos + 1;
      let complete = false;
      for (; i < end && i < pos + 5; i++) {
        len += (buf[i] & 0x7f) * mul;
        mul *= 128;
        if ((buf[i] & 0x80) === 0) {
          complete = true;
          i++;
          break;
        }
      }
      if (!complete || end - i < len) break;
      onPacket(buf[pos], buf, i, i + len);
      pos = i + len;
    }
    if (pos > 0) {
      buf.copyWithin(0, pos, end);
      end -= pos;
    }
    if (afterChunk) await afterChunk();
  }
}

/** Connects over loopback, sends CONNECT and waits for CONNACK 0; returns the open socket. */
export async function connectMqtt(
  port: number,
  clientId: string,
  keepAliveS = 600,
  clean = true,
): Promise<Deno.TcpConn> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  conn.setNoDelay(true);
  await writeAll(conn, encodeConnect(clientId, keepAliveS, clean));
  const b = new Uint8Array(16);
  let got = 0;
  while (got < 4) {
    const n = await conn.read(b.subarray(got));
    if (n === null) {
      conn.close();
      throw new Error(`Connection closed before CONNACK for "${clientId}"`);
    }
    got += n;
  }
  if (b[0] !== 0x20 || b[3] !== 0) {
    conn.close();
    throw new Error(`CONNACK refused for "${clientId}": return code ${b[3]}`);
  }
  return conn;
}

/** Offset of a received PUBLISH's payload given its body start. */
export function publishPayloadAt(first: number, buf: Uint8Array, body: number): number {
  const tlen = (buf[body] << 8) | buf[body + 1];
  return body + 2 + tlen + (((first >> 1) & 3) > 0 ? 2 : 0);
}
