/**
 * The fixed header of an MQTT packet [MQTT-2.2]: the type-and-flags byte and the remaining
 * length (1–4 bytes, 7 bits each). The size cap is checked here, from the header alone.
 *
 * @module
 */
import { ProtocolError } from "./errors.ts";

/** MQTT 5 reason code 0x95 Packet too large. */
const PACKET_TOO_LARGE = 0x95;

/** Fixed header: first byte, remaining length, and its own size. */
export interface FixedHeader {
  readonly byte1: number;
  readonly remaining: number;
  readonly headerBytes: number;
}

/**
 * The fixed header at `b[pos]`, or null while its bytes have not all arrived. Throws a
 * ProtocolError with the packet type when the length is over `max` (as soon as the part read
 * so far is) or runs past 4 bytes.
 */
export function readFixedHeader(
  b: Uint8Array,
  pos: number,
  max: number,
  bound = "max_packet_bytes",
): FixedHeader | null {
  let remaining = 0;
  let mult = 1;
  for (let i = 1; i <= 4; i++) {
    if (pos + i >= b.length) return null;
    const digit = b[pos + i];
    remaining += (digit & 0x7f) * mult;
    if ((digit & 0x80) === 0) {
      if (remaining > max) {
        const err = new ProtocolError(
          "MQTT-2.2.3",
          `Packet of ${remaining} bytes exceeds ${bound} ${max}`,
          PACKET_TOO_LARGE,
        );
        err.packetType = b[pos] >> 4;
        throw err;
      }
      return { byte1: b[pos], remaining, headerBytes: i + 1 };
    }
    mult *= 128;
    // Refuse as soon as the partial length already exceeds the cap.
    if (remaining > max) {
      throw tagged(
        new ProtocolError("MQTT-2.2.3", `Packet exceeds ${bound} ${max}`, PACKET_TOO_LARGE),
        b,
        pos,
      );
    }
  }
  throw tagged(new ProtocolError("MQTT-2.2.3", "Remaining length longer than 4 bytes"), b, pos);
}

/** Tags a fixed-header error with its packet type, so a refused PUBLISH counts as `rejected`. */
function tagged(err: ProtocolError, b: Uint8Array, pos: number): ProtocolError {
  err.packetType = b[pos] >> 4;
  return err;
}

/**
 * The fixed header at `b[pos]`, bounded by `maxPacketBytes`, or before the CONNECT (`connected`
 * false) by the smaller `maxConnectPacketBytes`: until someone logged in, a connection holds no
 * more of the bytes every connection shares.
 */
export function readBoundedHeader(
  b: Uint8Array,
  pos: number,
  limits: { readonly maxPacketBytes: number; readonly maxConnectPacketBytes?: number },
  connected: boolean,
): FixedHeader | null {
  const max = limits.maxPacketBytes;
  const first = limits.maxConnectPacketBytes;
  if (connected || first === undefined || first >= max) return readFixedHeader(b, pos, max);
  return readFixedHeader(b, pos, first, "max_connect_packet_bytes");
}
