/**
 * The load generator's own MQTT 3.1.1 client pieces: pre-encoded packets, whole-buffer writes,
 * CONNECT over a Deno socket (the stored-session scenario, and readiness checks).
 * Deliberately minimal (only what the benchmark sends); what it receives under load is scanned
 * by the raw-socket scenarios (`_raw_load.ts`, `_raw_inbox.ts`).
 *
 * @module
 */
import { remainingLength } from "../../src/codec/encoder.ts";

const enc = new TextEncoder();

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
