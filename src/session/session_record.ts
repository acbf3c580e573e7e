/**
 * The shape of a stored-session record: what `StoredSessions` writes into the record topic
 * for one client id, and how a record read back becomes a session again. One record per
 * change; the latest record of a client id wins; a tombstone (`deleted`) removes the session.
 *
 * Fields: `v` 1, `s` [filter, granted QoS] pairs, `p` MQTT 5 options, `t` triple keys with a
 * position, `e` expiry (s), `o` wall-clock ms since offline or null, `u` the owner (the
 * principal's name; "" anonymous). A record without `u` was written before sessions had owners:
 * its session is owned by whoever resumes it first.
 *
 * @module
 */
import { decodeStoredOptions, encodeStoredOptions, type StoredOptions } from "./stored_options.ts";

/** The part of a stored session a record carries. */
export interface RecordedSession {
  readonly subscriptions: Map<string, 0 | 1 | 2>;
  options?: StoredOptions;
  readonly triples: Set<string>;
  expiryS: number;
  offlineSinceMs: number | null;
  /** The principal that owns the client id; undefined for a record of before owners. */
  owner?: string;
}

/** The record of a session, ready for JSON. */
export function sessionRecordOf(s: RecordedSession): unknown {
  return {
    v: 1,
    s: [...s.subscriptions],
    p: encodeStoredOptions(s.options),
    t: [...s.triples],
    e: s.expiryS,
    o: s.offlineSinceMs,
    ...(s.owner === undefined ? {} : { u: s.owner }),
  };
}

/** The tombstone that supersedes a removed session's records. */
export const SESSION_TOMBSTONE = { v: 1, deleted: true } as const;

/** A parsed record: a session's state, a tombstone, or malformed. */
export type ParsedRecord =
  | { readonly kind: "session"; apply(s: RecordedSession, maxExpiryS: number): void }
  | { readonly kind: "deleted" }
  | { readonly kind: "malformed" };

/** Parses a record's JSON payload; nothing is changed until {@link ParsedRecord.apply}. */
export function parseSessionRecord(json: string): ParsedRecord {
  let r: unknown;
  try {
    r = JSON.parse(json);
  } catch {
    return { kind: "malformed" };
  }
  if ((r as { deleted?: unknown } | null)?.deleted === true) return { kind: "deleted" };
  if (!wellFormed(r)) return { kind: "malformed" }; // checked before anything changes
  const record = r;
  return { kind: "session", apply: (s, maxExpiryS) => applyRecord(record, s, maxExpiryS) };
}

interface WellFormedRecord {
  s: [string, number][];
  t?: string[];
  p?: unknown;
  e?: unknown;
  o?: number | null;
  u?: string;
}

function applyRecord(r: WellFormedRecord, s: RecordedSession, maxExpiryS: number): void {
  s.subscriptions.clear();
  for (const [f, q] of r.s) s.subscriptions.set(String(f), q === 0 ? 0 : q === 2 ? 2 : 1);
  s.options = decodeStoredOptions(r.p);
  s.triples.clear();
  for (const k of Array.isArray(r.t) ? r.t : []) s.triples.add(String(k));
  // An expiry of 0 is kept (the session ends when it goes offline); only a record without a
  // usable one gets the maximum.
  const e = typeof r.e === "number" ? r.e : NaN;
  s.expiryS = Number.isFinite(e) && e >= 0 ? e : maxExpiryS;
  s.offlineSinceMs = typeof r.o === "number" ? r.o : null;
  s.owner = r.u;
}

/** A session record's shape: `s` [filter, qos] pairs, `t` triple keys, `o` a time or null. */
function wellFormed(r: unknown): r is WellFormedRecord {
  if (typeof r !== "object" || r === null) return false;
  const { s, t, o, u } = r as Record<string, unknown>;
  const pair = (e: unknown) =>
    Array.isArray(e) && e.length === 2 && typeof e[0] === "string" && typeof e[1] === "number";
  return Array.isArray(s) && s.every(pair) &&
    (t === undefined || (Array.isArray(t) && t.every((k) => typeof k === "string"))) &&
    (o === undefined || o === null || typeof o === "number") &&
    (u === undefined || typeof u === "string");
}
