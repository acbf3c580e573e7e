/**
 * Every acknowledgement of an inbound PUBLISH or PUBREL that is not the plain 4-byte one (those
 * the connection's outbox writes itself, `Outbox.pushAck`): MQTT 5 PUBACKs with a reason
 * code, the PUBACK with log coordinates, and the PUBCOMP of an unknown packet id. Each fits the
 * client's Maximum Packet Size: what would not fit (a reason string, user properties) is left
 * out, the bare reason code always fits [MQTT-3.1.2-25, MQTT-3.4.2-2, MQTT-3.4.2-3].
 *
 * @module
 */
import { encodeAck5, encodePuback5 } from "../codec/encode_v5.ts";
import { AckType } from "../codec/encoder.ts";
import { BackendError, type PartitionAddress } from "../log/port.ts";
import { Puback5 } from "./publish_v5.ts";
import type { V5Session } from "./v5_session.ts";

/** The PUBACK of a refused or failed publish; the reason string only when the client wants it. */
export function refusalPuback(
  v5: V5Session,
  packetId: number,
  code: number,
  reason: string,
): Uint8Array {
  const puback = encodePuback5(packetId, code, v5.problemInformation ? reason : undefined);
  return fits(v5, puback) ? puback : encodePuback5(packetId, code);
}

/** The packet is within the client's Maximum Packet Size. */
function fits(v5: V5Session, packet: Uint8Array): boolean {
  return packet.length <= v5.maximumPacketSize;
}

/** The reason code of a failed append: 0x97 when the log is full, else 0x80. */
export function failureCode(err: unknown): number {
  return err instanceof BackendError && err.code === "full"
    ? Puback5.QUOTA_EXCEEDED
    : Puback5.UNSPECIFIED_ERROR;
}

/**
 * A successful PUBACK with the log coordinates as user properties (`mqtt5.puback_coordinates`):
 * where a consumer of the log finds this very message. Without an offset (a backend that did
 * not say) the offset property is left out.
 */
export function coordinatesPuback(
  v5: V5Session,
  packetId: number,
  a: PartitionAddress,
  offset: number | null,
): Uint8Array {
  const props: [string, string][] = [
    ["iggy.stream", a.stream],
    ["iggy.topic", a.topic],
    ["iggy.partition", String(a.partition)],
  ];
  if (offset !== null) props.push(["iggy.offset", String(offset)]);
  const puback = encodePuback5(packetId, 0, undefined, props);
  return fits(v5, puback) ? puback : encodePuback5(packetId, 0);
}

/** PUBCOMP 0x92 Packet Identifier not found: a PUBREL of an id not held (MQTT 5). */
export function unknownPubcomp(packetId: number): Uint8Array {
  return encodeAck5(AckType.PUBCOMP, packetId, 0x92);
}
