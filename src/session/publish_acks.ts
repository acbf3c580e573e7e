/**
 * The one place where the reason codes of the way in are decided, and every acknowledgement of
 * an inbound PUBLISH or PUBREL that is not the plain 4-byte one (those the connection's outbox
 * writes itself, `Outbox.pushAck`): MQTT 5 PUBACKs with a reason code (0x87 denied, 0x90 topic
 * name invalid, 0x97 quota exceeded or log full, 0x80 failed, 0x99 payload format invalid,
 * which replace the 3.1.1 "no PUBACK, close"), the PUBACK with log coordinates, the PUBCOMP of
 * an unknown packet id, and the DISCONNECT codes of a PUBLISH that cannot be answered with a
 * PUBACK. Each acknowledgement fits the client's Maximum Packet Size: what would not fit (a
 * reason string, user properties) is left out, the bare reason code always fits
 * [MQTT-3.1.2-25, MQTT-3.4.2-2, MQTT-3.4.2-3].
 *
 * @module
 */
import { encodeAck5, encodePuback5 } from "../codec/encode_v5.ts";
import { AckType } from "../codec/encoder.ts";
import { BackendError, type PartitionAddress } from "../log/port.ts";
import type { DenialCause, Denied, Failed } from "./publish.ts";
import type { ContentProblem } from "./publish_v5.ts";
import type { V5Session } from "./v5_session.ts";

/** PUBACK reason codes [MQTT-3.4.2.1]. */
const Puback5 = {
  UNSPECIFIED_ERROR: 0x80,
  NOT_AUTHORIZED: 0x87,
  TOPIC_NAME_INVALID: 0x90,
  QUOTA_EXCEEDED: 0x97,
  PAYLOAD_FORMAT_INVALID: 0x99,
} as const;

const DENIAL_CODES: Readonly<Record<DenialCause, number>> = {
  not_authorized: Puback5.NOT_AUTHORIZED,
  topic_name_invalid: Puback5.TOPIC_NAME_INVALID,
  quota_exceeded: Puback5.QUOTA_EXCEEDED,
};

/** DISCONNECT 0x93: more QoS 1 and 2 PUBLISHes unanswered than the Receive Maximum. */
export const RECEIVE_MAXIMUM_EXCEEDED = 0x93;

/** The PUBACK of a publish denied or failed before its append. */
export function refusalPuback(v5: V5Session, packetId: number, r: Denied | Failed): Uint8Array {
  const code = r.kind === "failed" ? Puback5.UNSPECIFIED_ERROR : DENIAL_CODES[r.cause];
  return withReason(v5, packetId, code, r.reason);
}

/** The PUBACK of a publish whose append failed: 0x97 when the log is full, else 0x80. */
export function failurePuback(v5: V5Session, packetId: number, err: unknown): Uint8Array {
  const code = err instanceof BackendError && err.code === "full"
    ? Puback5.QUOTA_EXCEEDED
    : Puback5.UNSPECIFIED_ERROR;
  return withReason(v5, packetId, code, String((err as Error)?.message ?? err));
}

/**
 * A PUBLISH refused for its content: 0x99 in a PUBACK. PUBACK has no "too large" code, so an
 * unstorable property gets 0x99 with the reason saying which property.
 */
export function contentPuback(v5: V5Session, packetId: number, c: ContentProblem): Uint8Array {
  return withReason(v5, packetId, Puback5.PAYLOAD_FORMAT_INVALID, c.reason);
}

/** The DISCONNECT code of a PUBLISH refused for its content that gets no PUBACK (QoS 0). */
export function contentDisconnectCode(c: ContentProblem): number {
  return c.problem === "payload_format" ? Puback5.PAYLOAD_FORMAT_INVALID : 0x95; // packet too large
}

/** A PUBACK with a reason code; the reason string only when the client wants it and it fits. */
function withReason(v5: V5Session, packetId: number, code: number, reason: string): Uint8Array {
  const puback = encodePuback5(packetId, code, v5.problemInformation ? reason : undefined);
  return fits(v5, puback) ? puback : encodePuback5(packetId, code);
}

/** The packet is within the client's Maximum Packet Size. */
function fits(v5: V5Session, packet: Uint8Array): boolean {
  return packet.length <= v5.maximumPacketSize;
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
