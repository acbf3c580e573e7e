/**
 * A message's trace context in the envelope: the headers `traceparent` and `tracestate`, under
 * the W3C names, so an Iggy consumer instrumented with OpenTelemetry continues the trace. An
 * MQTT 5 device's `traceparent` user property (and a `tracestate` after it) is stored there and
 * not again as `mqtt5.user.<i>.<name>`: the other user properties keep their positions, so the
 * gaps tell where the two stood, and an MQTT 5 subscriber gets them back in the order they were
 * sent [MQTT-3.3.2-18]. A trace the gateway started (no property) is given to MQTT 5 subscribers
 * after the message's user properties.
 *
 * @module
 */
import { TRACEPARENT, TRACESTATE } from "../observe/trace_context.ts";

/** What of a message's trace the envelope stores. */
export interface StoredTrace {
  /** The `traceparent` header: the gateway's publish span, or the device's own when not exported. */
  readonly traceparent: string;
  /** The device's `tracestate`, passed on unchanged; null when it sent none. */
  readonly tracestate: string | null;
  /** The position of the user property `traceparent` taken; -1 when the gateway began the trace. */
  readonly parentAt: number;
  /** The position of the user property `tracestate` taken; -1 when none. */
  readonly stateAt: number;
}

/** Where an MQTT 5 PUBLISH's trace user properties stand. */
export interface TraceProperties {
  /** The first `traceparent`. */
  readonly parentAt: number;
  /** The first `tracestate` after it, or -1: one sent before stays a plain user property. */
  readonly stateAt: number;
}

/** The positions of the trace user properties in `users`, or null when there is no `traceparent`. */
export function findTraceProperties(
  users: readonly (readonly [string, string])[],
): TraceProperties | null {
  let parentAt = -1;
  for (let i = 0; i < users.length; i++) {
    const name = users[i][0];
    if (parentAt < 0) {
      if (name === TRACEPARENT) parentAt = i;
    } else if (name === TRACESTATE) return { parentAt, stateAt: i };
  }
  return parentAt < 0 ? null : { parentAt, stateAt: -1 };
}

/** Writes the trace headers. */
export function stampTrace(headers: Map<string, string>, trace: StoredTrace): void {
  headers.set(TRACEPARENT, trace.traceparent);
  if (trace.tracestate !== null) headers.set(TRACESTATE, trace.tracestate);
}

/** Whether user property `i` is stored as a trace header instead. */
export function isTraceProperty(trace: StoredTrace | undefined, i: number): boolean {
  return trace !== undefined && (i === trace.parentAt || i === trace.stateAt);
}

/**
 * The user properties of a stored message with its trace headers put back where they were sent
 * (`users`: position, name, value, sorted by position): in the first gaps, in the order
 * `traceparent`, `tracestate`, or after the rest. Null when the message has no trace headers.
 */
export function withTraceProperties(
  headers: ReadonlyMap<string, string>,
  users: readonly (readonly [number, string, string])[],
): (readonly [string, string])[] | null {
  const trace: (readonly [string, string])[] = [];
  const parent = headers.get(TRACEPARENT);
  if (parent === undefined) return null;
  trace.push([TRACEPARENT, parent]);
  const state = headers.get(TRACESTATE);
  if (state !== undefined) trace.push([TRACESTATE, state]);
  const out: (readonly [string, string])[] = [];
  let next = 0;
  let k = 0;
  for (const [i, name, value] of users) {
    while (next < i && k < trace.length) {
      out.push(trace[k++]);
      next++;
    }
    out.push([name, value]);
    next = i + 1;
  }
  while (k < trace.length) out.push(trace[k++]);
  return out;
}
