/**
 * Where a subscription starts in the log: `earliest` (the oldest retained
 * message), `latest` (only what comes next: the default), or `time:<RFC 3339 | epoch ms>`.
 * MQTT 3.1.1 names it in a filter prefix, `$replay/<from>/<filter>`; MQTT 5 in the subscription's
 * `iggy-from` user property, parsed with the same {@link parseReplayFrom} and passed to
 * `DeliveryPort.subscribe` as `from`.
 *
 * @module
 */

/** Where a subscription starts reading. */
export type ReplayFrom =
  | { readonly kind: "earliest" }
  | { readonly kind: "latest" }
  | { readonly kind: "time"; readonly micros: number };

/** The filter prefix of a 3.1.1 replay subscription. */
export const REPLAY_PREFIX = "$replay/";

/** Parses `earliest | latest | time:<RFC 3339 or epoch ms>`; null when it is none of these. */
export function parseReplayFrom(text: string): ReplayFrom | null {
  if (text === "earliest" || text === "latest") return { kind: text };
  if (!text.startsWith("time:")) return null;
  const t = text.slice(5);
  const ms = /^\d{1,16}$/.test(t) ? Number(t) : /^\d{4}-\d\d-\d\dT/.test(t) ? Date.parse(t) : NaN;
  if (!Number.isFinite(ms) || ms < 0) return null;
  return { kind: "time", micros: ms * 1000 };
}

/** A `$replay/<from>/<filter>` subscription split up, or why it is malformed. */
export type ReplayFilter =
  | { readonly prefix: string; readonly from: ReplayFrom; readonly filter: string }
  | { readonly problem: string };

/**
 * Splits a 3.1.1 replay filter. Returns null for a filter without the prefix. The `<from>` part
 * is one level, so an RFC 3339 time is written without "/" (it has none).
 */
export function parseReplayFilter(filter: string): ReplayFilter | null {
  if (!filter.startsWith(REPLAY_PREFIX)) return null;
  const end = filter.indexOf("/", REPLAY_PREFIX.length);
  if (end === -1 || end === filter.length - 1) {
    return { problem: "a replay filter is $replay/<from>/<filter>" };
  }
  const from = parseReplayFrom(filter.slice(REPLAY_PREFIX.length, end));
  if (from === null) {
    return { problem: "replay start must be earliest, latest or time:<RFC 3339 | epoch ms>" };
  }
  return { prefix: filter.slice(0, end + 1), from, filter: filter.slice(end + 1) };
}
