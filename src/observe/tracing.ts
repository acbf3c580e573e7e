/**
 * Traces through `@opentelemetry/api` (exported by Deno when `OTEL_DENO=true`): a span per
 * connection, one span per append batch and per delivery batch, each linked to the
 * connection(s) it served. With the export off the API is not loaded (`otel.ts`) and every
 * span is {@link NO_SPAN}: no options object or span is built per batch.
 *
 * @module
 */
import type { Link, Span, SpanContext } from "@opentelemetry/api";
import { otel } from "./otel.ts";

const tracer = otel?.trace.getTracer("iggy-mqtt-gateway") ?? null;

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

/** Starts the span of one append batch, linked to its connection. */
export function startAppendSpan(
  connection: SpanContext | null,
  stream: string,
  topic: string,
  partition: number,
  messages: number,
): Span {
  if (tracer === null) return NO_SPAN;
  return tracer.startSpan("log.append", {
    links: connection ? [{ context: connection }] : [],
    attributes: {
      "iggy.stream": stream,
      "iggy.topic": topic,
      "iggy.partition": partition,
      "messaging.batch.message_count": messages,
    },
  });
}

/** Starts the span of one delivery batch (a poll routed to subscribers), linked to them. */
export function startDeliverySpan(
  stream: string,
  topic: string,
  partition: number,
  messages: number,
  connections: Iterable<SpanContext>,
): Span {
  if (tracer === null) return NO_SPAN;
  const links: Link[] = [];
  for (const c of connections) {
    if (links.length >= MAX_LINKS) break;
    links.push({ context: c });
  }
  return tracer.startSpan("delivery.batch", {
    links,
    attributes: {
      "iggy.stream": stream,
      "iggy.topic": topic,
      "iggy.partition": partition,
      "messaging.batch.message_count": messages,
    },
  });
}
