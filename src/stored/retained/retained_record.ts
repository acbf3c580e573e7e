/**
 * The records of the retained topic (`retained_store.ts`), one message each:
 *
 * - a **change**: the retained PUBLISH's envelope as it was appended to its own topic
 *   (`mqtt.topic`, `mqtt.retain`, its MQTT 5 properties …); with `mqtt.empty` it clears the
 *   topic's retained message [MQTT-3.3.1-10];
 * - a **snapshot marker**: `mqtt.retained_snapshot` = a fresh id, `mqtt.retained_base` = the
 *   last record offset the snapshot's set includes, `mqtt.retained_count` = its entries;
 * - a **snapshot entry**: a retained message restated, with `mqtt.retained_snapshot` = the
 *   marker's id and `mqtt.retained_at` = when it was set (µs; Message Expiry counts from it).
 *
 * @module
 */
import { H_EMPTY, H_TOPIC } from "../envelope.ts";
import type { OutgoingMessage, StoredMessage } from "../../log/port.ts";
import { entryOf, type RetainedEntry } from "./retained_set.ts";

export const H_SNAPSHOT = "mqtt.retained_snapshot";
const H_BASE = "mqtt.retained_base";
const H_COUNT = "mqtt.retained_count";
const H_AT = "mqtt.retained_at";
const MARKER_PAYLOAD = new Uint8Array([0]);

/** A snapshot marker read back. */
export interface SnapshotMarker {
  readonly id: string;
  /** Offset of the last record the snapshot includes (-1: none). */
  readonly base: number;
  readonly count: number;
}

/** What one record says. */
export type RetainedRecord =
  | { readonly kind: "set"; readonly entry: RetainedEntry }
  | { readonly kind: "clear"; readonly topic: string }
  | { readonly kind: "marker"; readonly marker: SnapshotMarker }
  | { readonly kind: "snapshot"; readonly id: string; readonly entry: RetainedEntry }
  | { readonly kind: "malformed" };

/** The marker record of a snapshot. */
export function markerRecord(m: SnapshotMarker): OutgoingMessage {
  return {
    payload: MARKER_PAYLOAD,
    headers: new Map([[H_SNAPSHOT, m.id], [H_BASE, String(m.base)], [H_COUNT, String(m.count)]]),
  };
}

/** One snapshot entry record: the retained message restated under snapshot `id`. */
export function snapshotRecord(
  id: string,
  e: RetainedEntry,
  message: StoredMessage,
): OutgoingMessage {
  const headers = new Map(message.headers);
  headers.set(H_SNAPSHOT, id);
  headers.set(H_AT, String(e.atMicros));
  return { payload: message.payload, headers };
}

/** Reads one record of the retained topic. */
export function readRecord(m: StoredMessage): RetainedRecord {
  const h = m.headers;
  const id = h.get(H_SNAPSHOT);
  if (id !== undefined && h.has(H_BASE)) {
    const base = Number(h.get(H_BASE));
    const count = Number(h.get(H_COUNT));
    if (!Number.isSafeInteger(base) || !Number.isSafeInteger(count)) return { kind: "malformed" };
    return { kind: "marker", marker: { id, base, count } };
  }
  const topic = h.get(H_TOPIC);
  if (topic === undefined || topic === "") return { kind: "malformed" };
  if (id === undefined) {
    if (h.get(H_EMPTY) === "true") return { kind: "clear", topic };
    return { kind: "set", entry: entryOf(topic, m, m.timestampMicros) };
  }
  const at = Number(h.get(H_AT));
  if (!Number.isSafeInteger(at)) return { kind: "malformed" };
  const headers = new Map(h);
  headers.delete(H_SNAPSHOT);
  headers.delete(H_AT);
  return { kind: "snapshot", id, entry: entryOf(topic, { payload: m.payload, headers }, at) };
}
