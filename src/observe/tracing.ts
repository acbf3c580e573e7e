/**
 * Traces through `@opentelemetry/api` (exported by Deno when `OTEL_DENO=true`): a span per
 * connection; a span per PUBLISH, child of the device's `traceparent` or the root of a new
 * trace; one span per append batch and per delivery batch, each the child of the first traced
 * message it carries, linked to the others and to the connection(s) it served. With the export
 * off the API is not loaded (`otel.ts`) and every span is {@link NO_SPAN}: no options object or
 * span is built per message or batch.
 *
 * @module
 */
import type { Context, Link, Span, SpanContext } from "@opentelemetry/api";
import { otel } from "./otel.ts";
import {
  formatTraceparent,
  parseTraceparent,
  TRACEPARENT,
  type TraceParent,
} from "./trace_context.ts";

const tracer = otel?.trace.getTracer("iggy-mqtt-gateway") ?? null;

/** Whether spans are made at all (telemetry exported). */
export const tracing = tracer !== null;

function noop(): void {}

/** The span of every batch while traces are not exported: all its methods do nothing. */
const NO_SPAN = {
  end: noop,
  setStatus: () => NO_SPAN,
  addLink: () => NO_SPAN,
} as unknown as Span;

/** At most this many connection links per delivery batch span (bounded). */
const MAX_LINKS = 16;

/**
 * Starts the long-lived span of one MQTT connection; null when it would not be recorded (no
 * exporter: the API's no-op span), so an idle connection holds no span object for nothing.
 */
export function startConnectionSpan(clientId: string, remote: string): Span | null {
  if (tracer === null) return null;
  const span = tracer.startSpan("mqtt.connection", {
    attributes: { "mqtt.client_id": clientId, "net.peer.ip": remote },
  });
  return span.isRecording() ? span : null;
}

/** The context of a device's (or a stored) `traceparent`, as a remote parent. */
function remoteContext(p: TraceParent): SpanContext {
  return { traceId: p.traceId, spanId: p.spanId, traceFlags: p.flags, isRemote: true };
}

/** `ctx` as the parent of a span to start. */
function parentOf(ctx: SpanContext | null): Context | undefined {
  if (ctx === null || otel === null) return undefined;
  return otel.trace.setSpanContext(otel.ROOT_CONTEXT, ctx);
}

/**
 * Starts the span of one PUBLISH: the child of the device's `traceparent`, or (none, or
 * telemetry not exported) the root of a new trace. Null when telemetry is not exported.
 */
export function startPublishSpan(
  parent: TraceParent | null,
  connection: SpanContext | null,
  topic: string,
  clientId: string,
): Span | null {
  if (tracer === null) return null;
  return tracer.startSpan("mqtt.publish", {
    links: connection ? [{ context: connection }] : [],
    attributes: { "mqtt.topic": topic, "mqtt.client_id": clientId },
  }, parentOf(parent === null ? null : remoteContext(parent)));
}

/** The `traceparent` that names `span` (what the envelope stores). */
export function traceparentOf(span: Span): string {
  const c = span.spanContext();
  return formatTraceparent(c.traceId, c.spanId, c.traceFlags);
}

/**
 * Starts the span of one append batch: the child of its first message's publish span
 * (`publishes`, null when none is traced), linked to the others and to its connection.
 */
export function startAppendSpan(
  connection: SpanContext | null,
  stream: string,
  topic: string,
  partition: number,
  messages: number,
  publishes: readonly Span[] | null = null,
): Span {
  if (tracer === null) return NO_SPAN;
  const links: Link[] = connection ? [{ context: connection }] : [];
  let parent: SpanContext | null = null;
  if (publishes !== null) {
    for (const p of publishes) {
      if (parent === null) parent = p.spanContext();
      else if (links.length < MAX_LINKS) links.push({ context: p.spanContext() });
    }
  }
  return tracer.startSpan("log.append", {
    links,
    attributes: {
      "iggy.stream": stream,
      "iggy.topic": topic,
      "iggy.partition": partition,
      "messaging.batch.message_count": messages,
    },
  }, parentOf(parent));
}

/**
 * Starts the span of one delivery batch (a poll routed to subscribers): the child of the first
 * message with a stored `traceparent`, linked to the next ones; the connections it served are
 * linked by the router. One header lookup per message, only while telemetry is exported.
 */
export function startDeliverySpan(
  stream: string,
  topic: string,
  partition: number,
  batch: readonly { readonly headers: ReadonlyMap<string, string> }[],
): Span {
  if (tracer === null) return NO_SPAN;
  const links: Link[] = [];
  let parent: SpanContext | null = null;
  for (const m of batch) {
    const v = m.headers.get(TRACEPARENT);
    const p = v === undefined ? null : parseTraceparent(v);
    if (p === null) continue;
    if (parent === null) parent = remoteContext(p);
    else if (links.length < MAX_LINKS) links.push({ context: remoteContext(p) });
    else break;
  }
  return tracer.startSpan("delivery.batch", {
    links,
    attributes: {
      "iggy.stream": stream,
      "iggy.topic": topic,
      "iggy.partition": partition,
      "messaging.batch.message_count": batch.length,
    },
  }, parentOf(parent));
}
