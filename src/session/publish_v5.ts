/**
 * The MQTT 5 side of the way in: what refuses a PUBLISH for its content
 * (a payload that is not the UTF-8 its payload format indicator promises, a property that
 * cannot be stored as an Iggy header), and the PUBACKs with reason codes that replace the
 * 3.1.1 "no PUBACK, close": 0x87 denied, 0x90 topic name invalid, 0x80 backend failed, 0x97
 * backend full, 0x99 payload format invalid. The acknowledgements themselves are encoded in
 * `publish_acks.ts`.
 *
 * @module
 */
import type { PublishPacket } from "../codec/packets.ts";
import { checkPropertiesFit } from "../stored/envelope_v5.ts";

/** PUBACK reason codes [MQTT-3.4.2.1]. */
export const Puback5 = {
  UNSPECIFIED_ERROR: 0x80,
  NOT_AUTHORIZED: 0x87,
  TOPIC_NAME_INVALID: 0x90,
  QUOTA_EXCEEDED: 0x97,
  PAYLOAD_FORMAT_INVALID: 0x99,
} as const;

/** A PUBLISH refused for its content: the PUBACK code (QoS 1) or DISCONNECT code (QoS 0). */
export interface ContentRefusal {
  readonly pubackCode: number;
  readonly disconnectCode: number;
  readonly reason: string;
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** Why an MQTT 5 PUBLISH cannot be taken as it is, or null. */
export function refuseContent5(p: PublishPacket): ContentRefusal | null {
  const props = p.properties;
  if (props === undefined) return null;
  if (props.payloadFormat === 1 && !isUtf8(p.payload)) {
    // [MQTT-3.3.2-4] the receiver may check; a log consumer trusts the indicator.
    return {
      pubackCode: Puback5.PAYLOAD_FORMAT_INVALID,
      disconnectCode: Puback5.PAYLOAD_FORMAT_INVALID,
      reason: "payload format indicator is 1 but the payload is not UTF-8",
    };
  }
  const unfit = checkPropertiesFit(props);
  if (unfit === null) return null;
  // PUBACK has no "too large" code; 0x99 with the reason says which property.
  return {
    pubackCode: Puback5.PAYLOAD_FORMAT_INVALID,
    disconnectCode: 0x95,
    reason: `property cannot be stored in Iggy: ${unfit}`,
  };
}

function isUtf8(b: Uint8Array): boolean {
  try {
    strictUtf8.decode(b);
    return true;
  } catch {
    return false;
  }
}
