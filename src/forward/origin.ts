/**
 * Where a forwarded message came from, in its headers: `mqtt.gateway` names the gateway (a
 * central consumer tells edges apart by it) and `mqtt.origin` its local partition and offset
 * (`<partition>/<offset>`), which is how the forwarder recognises, after a cut connection or a
 * crash, what of its own already landed upstream.
 *
 * @module
 */
import type { OutgoingMessage, StoredMessage } from "../log/port.ts";

/** Header naming the gateway that forwarded the message. */
export const GATEWAY_HEADER = "mqtt.gateway";
/** Header holding `<local partition>/<local offset>` of a forwarded message. */
export const ORIGIN_HEADER = "mqtt.origin";

/** A stored local message as it goes upstream: its headers plus the two of its origin. */
export function forwardedMessage(
  m: StoredMessage,
  gatewayId: string,
  partition: number,
): OutgoingMessage {
  const headers = new Map(m.headers);
  headers.set(GATEWAY_HEADER, gatewayId);
  headers.set(ORIGIN_HEADER, `${partition}/${m.offset}`);
  return { payload: m.payload, headers };
}

/**
 * The local offset of an upstream message this gateway forwarded from `partition`, or null
 * when it is someone else's (another gateway, another partition, another producer).
 */
export function originOffset(
  headers: ReadonlyMap<string, string>,
  gatewayId: string,
  partition: number,
): number | null {
  if (headers.get(GATEWAY_HEADER) !== gatewayId) return null;
  const origin = headers.get(ORIGIN_HEADER);
  if (origin === undefined) return null;
  const slash = origin.indexOf("/");
  if (slash < 0 || Number(origin.slice(0, slash)) !== partition) return null;
  const offset = Number(origin.slice(slash + 1));
  return Number.isSafeInteger(offset) && offset >= 0 ? offset : null;
}
