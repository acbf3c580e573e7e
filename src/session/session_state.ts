/**
 * One stored session as the gateway holds it while it runs: what its record carries
 * (`session_record.ts`) plus the QoS 2 state that is kept in memory only.
 *
 * @module
 */
import type { PacketIdSet } from "./packet_ids.ts";
import type { Qos2Out } from "./qos2_out.ts";
import {
  parseSessionRecord,
  type RecordedSession,
  sessionRecordOf,
} from "../stored/session_record.ts";

/** One stored session, kept in memory while the gateway runs (small: offline sessions add up). */
export interface StoredSession extends RecordedSession {
  readonly clientId: string;
  /** Wall-clock ms of the last record written. */
  savedAtMs: number;
  /**
   * QoS 2 state of the session [MQTT-4.1.0-1], kept in memory only (a gateway restart forgets
   * it: a resent QoS 2 PUBLISH is then appended again, a PUBREL is answered all the same).
   * `qos2Received`: the client's publishes awaiting their PUBREL; `qos2Out`: the QoS 2 copies
   * that were in flight when it went offline (`qos2_out.ts`).
   */
  qos2Received?: PacketIdSet;
  qos2Out?: Qos2Out;
}

/** A session with nothing stored yet (its expiry is set by whoever makes it). */
export function newSession(clientId: string): StoredSession {
  const [subscriptions, triples] = [new Map(), new Set<string>()];
  return { clientId, subscriptions, triples, expiryS: 0, offlineSinceMs: null, savedAtMs: 0 };
}

/**
 * A copy of `s` as its record has it (QoS 2 state not copied): what stays of a session on a
 * gateway whose connection to it another gateway took over; the one it had there goes offline
 * without a word (`StoredSessions.offline` passes over a session no longer the one stored).
 */
export function copyOf(s: StoredSession, maxExpiryS: number): StoredSession {
  const copy = newSession(s.clientId);
  const r = parseSessionRecord(JSON.stringify(sessionRecordOf(s)));
  if (r.kind === "session") r.apply(copy, maxExpiryS); // what sessionRecordOf writes always is
  copy.savedAtMs = s.savedAtMs;
  return copy;
}
