/**
 * Refusing a socket over a connection limit (`limits.max_connections`: CONNACK 0x97 Quota
 * exceeded; `limits.max_connection_rate_per_source`: 0x9F Connection rate exceeded) so that an
 * MQTT 5 client learns why. A 3.1.1 client is closed without a CONNACK: its CONNACK codes have
 * no such reasons.
 *
 * To know the client's version the refused socket's first bytes are read: bounded, because a
 * flood is when this runs — at most {@link MAX_REFUSING} sockets at once (beyond: closed at
 * once), each for at most {@link REFUSE_WAIT_MS} and {@link PEEK_BYTES} bytes. With
 * `listeners.mqtt_versions` without "5" every refused socket is closed at once.
 *
 * @module
 */
import { encodeConnack5, PropertyWriter } from "../codec/encode_v5.ts";
import { Prop } from "../codec/properties.ts";
import type { Transport, TransportSink } from "./transport.ts";

/** Refused sockets read at once at most. */
export const MAX_REFUSING = 64;
/** How long a refused socket may take to send its CONNECT's first bytes (ms). */
export const REFUSE_WAIT_MS = 1_000;
/** Bytes that show an MQTT 5 CONNECT: type, length (≤ 4), "MQTT" with its length, level. */
const PEEK_BYTES = 12;

/** Refusals in progress (one per gateway). */
export class EarlyRefusals {
  #active = 0;

  constructor(readonly speaks5: boolean) {}

  /** Refuses `t`: a v5 CONNECT gets CONNACK `code` with `reason`, anything else a close. */
  refuse(t: Transport, code: number, reason: string): void {
    if (!this.speaks5 || this.#active >= MAX_REFUSING) return t.close();
    this.#active++;
    let seen = new Uint8Array(0);
    let done = false;
    const finish = (v5: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      this.#active--;
      if (!v5) return t.close();
      const props = new PropertyWriter().string(Prop.REASON_STRING, reason);
      t.write(encodeConnack5(false, code, props)).catch(() => {}).finally(() => t.close());
    };
    const timer = setTimeout(() => finish(false), REFUSE_WAIT_MS);
    const sink: TransportSink = {
      data(chunk) {
        const next = new Uint8Array(Math.min(PEEK_BYTES, seen.length + chunk.length));
        next.set(seen.subarray(0, next.length));
        next.set(chunk.subarray(0, next.length - seen.length), seen.length);
        seen = next;
        const v5 = connectLevel(seen);
        if (v5 !== undefined) finish(v5 === 5);
      },
      end: () => finish(false),
    };
    t.start(sink);
  }
}

/** The protocol level of the CONNECT these first bytes start, null if not one, undefined: more. */
export function connectLevel(b: Uint8Array): number | null | undefined {
  if (b.length === 0) return undefined;
  if (b[0] !== 0x10) return null;
  let i = 1;
  while (i < b.length && i < 5 && (b[i] & 0x80) !== 0) i++;
  // After the remaining length: 0x00 0x04 "MQTT", then the level.
  const at = i + 1;
  if (b.length < at + 7) return b.length >= PEEK_BYTES ? null : undefined;
  const name = [0, 4, 0x4d, 0x51, 0x54, 0x54];
  for (let k = 0; k < 6; k++) if (b[at + k] !== name[k]) return null;
  return b[at + 6];
}
