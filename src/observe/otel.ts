/**
 * The OpenTelemetry API, loaded only when Deno exports telemetry (`OTEL_DENO=true`, read once
 * when the gateway's modules load). Without an exporter every span and instrument of the API is
 * a no-op, yet importing its package costs RSS at start and each no-op call
 * builds its options and a span object per append and per delivery batch; so when the export
 * is off the gateway does not load the package and its callers skip those calls.
 *
 * @module
 */
import type * as OtelApi from "@opentelemetry/api";

/** `OTEL_DENO=true`; false too when the permission set does not let us read the variable. */
function exportOn(): boolean {
  try {
    return Deno.env.get("OTEL_DENO") === "true";
  } catch {
    return false;
  }
}

/** The API when telemetry is exported, null otherwise. */
export const otel: typeof OtelApi | null = exportOn() ? await import("@opentelemetry/api") : null;

/** `SpanStatusCode.ERROR` of the API (a constant of the OpenTelemetry specification). */
export const SPAN_STATUS_ERROR = 2;
