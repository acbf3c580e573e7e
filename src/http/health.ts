/**
 * Health and readiness as plain functions of the gateway's state, apart from
 * the HTTP adapter.
 *
 * @module
 */
import type { BackendHealth } from "../log/port.ts";

/** Forward mode's uplink, as readiness reports it (it never makes the gateway unready). */
export interface UplinkReading {
  readonly up: boolean;
  readonly detail: string;
  readonly lagMessages: number;
  readonly lagSeconds: number;
}

/** What readiness depends on. */
export interface ReadinessInputs {
  readonly listenersBound: boolean;
  readonly stopping: boolean;
  readonly backend: BackendHealth;
  /** Conditions that do not stop readiness but an operator must know (durability). */
  readonly warnings?: readonly string[];
  /** Forward mode: the uplink to the upstream Iggy. */
  readonly uplink?: UplinkReading;
}

/** A readiness verdict with a reason an operator can act on. */
export interface Readiness {
  readonly ready: boolean;
  readonly reasons: readonly string[];
  readonly warnings: readonly string[];
  /** What the backend is connected to (Iggy: server version and wire dialect), when known. */
  readonly backend?: string;
  /** Forward mode: "up (…)" or "down: why", and the lag. */
  readonly uplink?: string;
}

/** Ready only when listeners are bound, the backend is ready, and we are not stopping. */
export function readiness(i: ReadinessInputs): Readiness {
  const reasons: string[] = [];
  if (!i.listenersBound) reasons.push("MQTT listeners are not bound");
  if (i.stopping) reasons.push("gateway is stopping");
  if (!i.backend.ready) reasons.push(`backend not ready: ${i.backend.reason ?? "unknown"}`);
  const verdict: Readiness = {
    ready: reasons.length === 0,
    reasons,
    warnings: i.warnings ?? [],
    ...(i.backend.detail ? { backend: i.backend.detail } : {}),
  };
  return i.uplink ? { ...verdict, uplink: uplinkLine(i.uplink) } : verdict;
}

/** The uplink in one line: devices are served either way, so it only informs. */
function uplinkLine(u: UplinkReading): string {
  const state = u.up ? `up (${u.detail})` : `down: ${u.detail}`;
  const lag = u.lagMessages === 0
    ? "nothing waiting"
    : `${u.lagMessages} messages waiting, oldest ${u.lagSeconds.toFixed(1)} s`;
  return `${state}; ${lag}`;
}
