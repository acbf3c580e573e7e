/**
 * The trace context of one PUBLISH (`stored/trace_headers.ts` says how it is stored): an MQTT 5
 * `traceparent` user property is checked (a malformed one is ignored, counted and logged, and
 * stays a plain user property); while telemetry is exported the PUBLISH gets a span, the child
 * of that `traceparent` or the root of a new trace (3.1.1, or none sent), and the envelope
 * stores the span's own `traceparent`. Not exported: a valid `traceparent` is stored as the
 * device sent it, and a PUBLISH without one costs a property lookup.
 *
 * @module
 */
import type { Span, SpanContext } from "@opentelemetry/api";
import type { PublishPacket } from "../codec/packets.ts";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import type { Logger } from "../observe/logger.ts";
import { parseTraceparent, type TraceParent } from "../observe/trace_context.ts";
import { startPublishSpan, traceparentOf, tracing } from "../observe/tracing.ts";
import { SPAN_STATUS_ERROR } from "../observe/otel.ts";
import { findTraceProperties, type StoredTrace } from "../stored/trace_headers.ts";

/** A PUBLISH's trace: what its envelope stores, and its span while telemetry is exported. */
export interface PublishTrace {
  readonly stored: StoredTrace;
  readonly span: Span | null;
}

/** What {@link traceOf} uses of the connection. */
export interface TraceSite {
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
  readonly clientId: string;
  readonly spanContext: SpanContext | null;
}

/** How much of a malformed value the warn line shows. */
const SHOWN_CHARS = 64;

/** The trace of `p`, or null when it has none (telemetry not exported, no valid `traceparent`). */
export function traceOf(p: PublishPacket, site: TraceSite): PublishTrace | null {
  const users = p.properties?.userProperties;
  if (users === undefined && !tracing) return null;
  const at = users === undefined ? null : findTraceProperties(users);
  let parent: TraceParent | null = null;
  if (at !== null) {
    const value = users![at.parentAt][1];
    parent = parseTraceparent(value);
    if (parent === null) malformed(site, value);
  }
  const taken = parent === null ? null : at!;
  const tracestate = taken !== null && taken.stateAt >= 0 ? users![taken.stateAt][1] : null;
  const parentAt = taken?.parentAt ?? -1;
  const stateAt = tracestate === null ? -1 : taken!.stateAt;
  if (!tracing) {
    if (parent === null) return null;
    const traceparent = users![parentAt][1];
    return { stored: { traceparent, tracestate, parentAt, stateAt }, span: null };
  }
  const span = startPublishSpan(parent, site.spanContext, p.topic, site.clientId)!;
  const traceparent = traceparentOf(span);
  return { stored: { traceparent, tracestate, parentAt, stateAt }, span };
}

/** Ignored: counted, and one warn line (rate-limited) naming the client and the value. */
function malformed(site: TraceSite, value: string): void {
  site.metrics.traceparentMalformed.inc();
  site.logger.limited("warn", "Malformed traceparent ignored", {
    client_id: site.clientId,
    traceparent: value.slice(0, SHOWN_CHARS),
  });
}

/** A traced PUBLISH that was not appended: its span ends in error, with the outcome. */
export function endRefusedSpan(span: Span, outcome: string, reason: string): void {
  span.setAttribute("mqtt.outcome", outcome);
  span.setStatus({ code: SPAN_STATUS_ERROR, message: reason });
  span.end();
}
