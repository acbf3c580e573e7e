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
  return {
    payload: m.payload,
    headers: new OriginHeaders(m.headers, gatewayId, partition, m.offset),
  };
}

/**
 * A message's headers with the two of its origin, read through to the stored map rather than
 * copied into a new one per forwarded message (a backlog goes out at hundreds of thousands of
 * messages a second). Stored headers of the same names are replaced, as `Map.set` would.
 */
class OriginHeaders implements ReadonlyMap<string, string> {
  readonly #base: ReadonlyMap<string, string>;
  readonly #gateway: string;
  readonly #origin: string;

  constructor(
    base: ReadonlyMap<string, string>,
    gateway: string,
    partition: number,
    offset: number,
  ) {
    this.#base = base;
    this.#gateway = gateway;
    this.#origin = `${partition}/${offset}`;
  }

  get size(): number {
    return this.#base.size + 2 - (this.#base.has(GATEWAY_HEADER) ? 1 : 0) -
      (this.#base.has(ORIGIN_HEADER) ? 1 : 0);
  }

  get(key: string): string | undefined {
    if (key === GATEWAY_HEADER) return this.#gateway;
    if (key === ORIGIN_HEADER) return this.#origin;
    return this.#base.get(key);
  }

  has(key: string): boolean {
    return key === GATEWAY_HEADER || key === ORIGIN_HEADER || this.#base.has(key);
  }

  forEach(
    fn: (value: string, key: string, map: ReadonlyMap<string, string>) => void,
    thisArg?: unknown,
  ): void {
    this.#base.forEach((value, key) => {
      if (key !== GATEWAY_HEADER && key !== ORIGIN_HEADER) fn.call(thisArg, value, key, this);
    });
    fn.call(thisArg, this.#gateway, GATEWAY_HEADER, this);
    fn.call(thisArg, this.#origin, ORIGIN_HEADER, this);
  }

  *entries(): MapIterator<[string, string]> {
    for (const [key, value] of this.#base) {
      if (key !== GATEWAY_HEADER && key !== ORIGIN_HEADER) yield [key, value];
    }
    yield [GATEWAY_HEADER, this.#gateway];
    yield [ORIGIN_HEADER, this.#origin];
  }

  *keys(): MapIterator<string> {
    for (const [key] of this.entries()) yield key;
  }

  *values(): MapIterator<string> {
    for (const [, value] of this.entries()) yield value;
  }

  [Symbol.iterator](): MapIterator<[string, string]> {
    return this.entries();
  }
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
