/**
 * Health and readiness as plain functions of the gateway's state, apart from
 * the HTTP adapter.
 *
 * @module
 */
import type { BackendHealth } from "../log/port.ts";

/** What readiness depends on. */
export interface ReadinessInputs {
  readonly listenersBound: boolean;
  readonly stopping: boolean;
  readonly backend: BackendHealth;
  /** Conditions that do not stop readiness but an operator must know (durability). */
  readonly warnings?: readonly string[];
}

/** A readiness verdict with a reason an operator can act on. */
export interface Readiness {
  readonly ready: boolean;
  readonly reasons: readonly string[];
  readonly warnings: readonly string[];
  /** What the backend is connected to (Iggy: server version and wire dialect), when known. */
  readonly backend?: string;
}

/** Ready only when listeners are bound, the backend is ready, and we are not stopping. */
export function readiness(i: ReadinessInputs): Readiness {
  const reasons: string[] = [];
  if (!i.listenersBound) reasons.push("MQTT listeners are not bound");
  if (i.stopping) reasons.push("gateway is stopping");
  if (!i.backend.ready) reasons.push(`backend not ready: ${i.backend.reason ?? "unknown"}`);
  const verdict = { ready: reasons.length === 0, reasons, warnings: i.warnings ?? [] };
  return i.backend.detail ? { ...verdict, backend: i.backend.detail } : verdict;
}
