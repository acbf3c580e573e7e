/**
 * The trace context of one PUBLISH (`stored/trace_headers.ts` says how it is stored): an MQTT 5
 * `traceparent` user property is checked, and a malformed one is ignored, counted and logged
 * with its value. While telemetry is exported the PUBLISH gets a span, the child of a valid
 * `traceparent` or the root of a new trace (3.1.1, none sent, or a malformed one, whose place
 * the new one takes), and the envelope stores the span's own `traceparent`. Not exported: a
 * valid `traceparent` is stored as the device sent it, a malformed one stays a plain user
 * property, and a PUBLISH without user properties costs a property lookup.
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
    parent = parseTraceparent(users![at.parentAt][1]);
    if (parent === null) malformed(site, users![at.parentAt][1]);
  }
  // A malformed one says nothing of its tracestate (W3C: not read); exported, the new trace
  // takes its place, so a subscriber gets one traceparent.
  const tracestate = parent !== null && at!.stateAt >= 0 ? users![at!.stateAt][1] : null;
  const parentAt = at?.parentAt ?? -1;
  const stateAt = tracestate === null ? -1 : at!.stateAt;
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
