/**
 * The MQTT 5 side of the way in: what refuses a PUBLISH for its content (a payload that is not
 * the UTF-8 its payload format indicator promises, a property that cannot be stored as an Iggy
 * header). The reason codes and acknowledgements are decided in `publish_acks.ts`.
 *
 * @module
 */
import type { PublishPacket } from "../codec/packets.ts";
import { checkPropertiesFit } from "../stored/envelope_v5.ts";

/**
 * What keeps an MQTT 5 PUBLISH from being taken as it is; its reason codes are decided in
 * `publish_acks.ts`.
 */
export interface ContentProblem {
  readonly problem: "payload_format" | "property_unfit";
  readonly reason: string;
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** Why an MQTT 5 PUBLISH cannot be taken as it is, or null. */
export function refuseContent5(p: PublishPacket): ContentProblem | null {
  const props = p.properties;
  if (props === undefined) return null;
  if (props.payloadFormat === 1 && !isUtf8(p.payload)) {
    // [MQTT-3.3.2-4] the receiver may check; a log consumer trusts the indicator.
    return {
      problem: "payload_format",
      reason: "payload format indicator is 1 but the payload is not UTF-8",
    };
  }
  const unfit = checkPropertiesFit(props);
  if (unfit === null) return null;
  return { problem: "property_unfit", reason: `property cannot be stored in Iggy: ${unfit}` };
}

function isUtf8(b: Uint8Array): boolean {
  try {
    strictUtf8.decode(b);
    return true;
  } catch {
    return false;
  }
}
