/**
 * The shape of a stored-session record: what `StoredSessions` writes into the record topic
 * for one client id, and how a record read back becomes a session again. One record per
 * change; the latest record of a client id wins; a tombstone (`deleted`) removes the session.
 *
 * Fields: `v` 1, `s` [filter, granted QoS] pairs, `p` MQTT 5 options, `t` triple keys with a
 * position, `e` expiry (s), `o` wall-clock ms since offline or null, `u` the owner (the
 * principal's name; "" anonymous), `m` the protocol whose expiry rule the session follows (4:
 * MQTT 3.1.1, whose expiry is `session.expiry_s` as it is now; 5: MQTT 5, whose expiry is its own
 * granted interval `e`, capped by `session.max_expiry_s` as it is now). A record without `u` was
 * written before sessions had owners: its session is owned by whoever resumes it first. A record
 * without `m` was written before sessions kept their protocol: it is MQTT 5 when it carries
 * MQTT 5 subscription options (`p`: every MQTT 5 subscription has them), else MQTT 3.1.1.
 *
 * @module
 */
import { decodeStoredOptions, encodeStoredOptions, type StoredOptions } from "./stored_options.ts";

/** The part of a stored session a record carries. */
export interface RecordedSession {
  /** Filters as subscribed → granted QoS. */
  readonly subscriptions: Map<string, 0 | 1 | 2>;
  /** MQTT 5 options of the filters that have them (`stored_options.ts`); absent on 3.1.1. */
  options?: StoredOptions;
  /** Triple keys with a position: a missing stored offset there means offset 0. */
  readonly triples: Set<string>;
  /** The interval asked at CONNECT (MQTT 5: granted; 3.1.1: `session.expiry_s` then). */
  expiryS: number;
  /** Wall-clock ms since the client is offline; null while it is connected. */
  offlineSinceMs: number | null;
  /**
   * The principal that owns the client id ("" anonymous): only it may resume, take over or
   * discard the session. Undefined for a record written before sessions had owners.
   */
  owner?: string;
  /**
   * MQTT 5: `expiryS` is the session's own granted interval; otherwise (MQTT 3.1.1) the
   * session's expiry is the setting `session.expiry_s` whenever it is read (`session_expiry.ts`).
   */
  mqtt5?: boolean;
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
    m: s.mqtt5 === true ? 5 : 4,
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
  m?: unknown;
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
  s.mqtt5 = r.m === 5 || (r.m !== 4 && s.options !== undefined);
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
