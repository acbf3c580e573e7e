/**
 * Where a forwarded message came from, in its headers: `mqtt.gateway` names the gateway (a
 * central consumer tells edges apart by it) and `mqtt.origin` its local partition and offset
 * (`<partition>/<offset>`), which is how the forwarder recognises, after a cut connection or a
 * crash, what of its own already landed upstream.
 *
 * @module
 */
import type { CopyStamp } from "../log/port.ts";

/** Header naming the gateway that forwarded the message. */
export const GATEWAY_HEADER = "mqtt.gateway";
/** Header holding `<local partition>/<local offset>` of a forwarded message. */
export const ORIGIN_HEADER = "mqtt.origin";

/**
 * The origin headers of one local partition's messages as they go upstream: the gateway's id,
 * and each message's `<partition>/<offset>`. Stored headers never hold these two names (the
 * envelope's keys are its own, MQTT 5 user properties are `mqtt5.user.*`).
 */
export function originStamp(gatewayId: string, partition: number): CopyStamp {
  return {
    headers: new Map([[GATEWAY_HEADER, gatewayId]]),
    offsetHeader: ORIGIN_HEADER,
    offsetPrefix: `${partition}/`,
  };
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
