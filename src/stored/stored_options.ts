/**
 * The MQTT 5 subscription options of a stored session's filters, as kept in its record:
 * No Local, Retain As Published, Retain Handling and the subscription identifier come
 * back with the subscription when the session resumes, so its deliveries carry the same
 * identifier and honour the same options. A 3.1.1 session has none: its record has no `p`.
 * User properties of the SUBSCRIBE (e.g. `iggy-from`) are not kept: a resume starts at the
 * session's stored positions.
 *
 * @module
 */
import type { SubscriptionOptions } from "../codec/packets.ts";

/** Filter → its options, for the filters that have them. */
export type StoredOptions = Map<string, SubscriptionOptions>;

/** One record entry: [filter, No Local 0|1, Retain As Published 0|1, Retain Handling, id]. */
type Entry = [string, 0 | 1, 0 | 1, 0 | 1 | 2, number];

/** The record field of `options`; undefined when there are none. */
export function encodeStoredOptions(options: StoredOptions | undefined): Entry[] | undefined {
  if (options === undefined || options.size === 0) return undefined;
  return [...options].map(([f, o]) => [
    f,
    o.noLocal ? 1 : 0,
    o.retainAsPublished ? 1 : 0,
    o.retainHandling,
    o.subscriptionId,
  ]);
}

/** The options a record carries; undefined when none (a malformed entry is skipped). */
export function decodeStoredOptions(raw: unknown): StoredOptions | undefined {
  if (!Array.isArray(raw) || raw.length === 0) return undefined;
  const out: StoredOptions = new Map();
  for (const e of raw) {
    if (!Array.isArray(e) || typeof e[0] !== "string") continue;
    const id = Number(e[4]);
    const handling = Number(e[3]);
    out.set(e[0], {
      noLocal: e[1] === 1,
      retainAsPublished: e[2] === 1,
      retainHandling: handling === 1 || handling === 2 ? handling : 0,
      subscriptionId: Number.isInteger(id) && id > 0 && id <= 268_435_455 ? id : 0,
    });
  }
  return out.size > 0 ? out : undefined;
}

/** The options to keep of a SUBSCRIBE's filter (without its user properties), or undefined. */
export function keptOptions(o: SubscriptionOptions | undefined): SubscriptionOptions | undefined {
  if (o === undefined) return undefined;
  const { noLocal, retainAsPublished, retainHandling, subscriptionId } = o;
  return { noLocal, retainAsPublished, retainHandling, subscriptionId };
}
