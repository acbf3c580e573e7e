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
export function readFixedHeader(b: Uint8Array, pos: number, max: number): FixedHeader | null {
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
          `Packet of ${remaining} bytes exceeds max_packet_bytes ${max}`,
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
        new ProtocolError("MQTT-2.2.3", `Packet exceeds max_packet_bytes ${max}`, PACKET_TOO_LARGE),
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
