/**
 * The gauges a running gateway registers in `/metrics` beside its counters: what it holds at the
 * moment (connections, bytes queued to subscribers, appends waiting, readers' lag) and the Iggy
 * client's send figures, read when the registry is scraped.
 *
 * @module
 */
import type { LogBackend } from "./log/port.ts";
import { watchRetention } from "./log/retention_watch.ts";
import { type GatewayMetrics, sendHistograms, sendRetryGauge } from "./observe/gateway_metrics.ts";
import type { Logger } from "./observe/logger.ts";
import { readerGauges } from "./observe/triple_gauge.ts";
import type { Delivery } from "./delivery/mod.ts";
import type { SessionContext } from "./session/context.ts";

/** What the gauges read. */
export interface GaugedParts {
  readonly metrics: GatewayMetrics;
  readonly backend: LogBackend;
  readonly logger: Logger;
  readonly registry: { readonly size: number };
  readonly delivery: Pick<Delivery, "readerStats">;
}

/** Registers the gateway's gauges (and the embedded log's retention counters and line). */
export function registerGatewayGauges(
  g: GaugedParts,
  budgets: Pick<SessionContext, "outboundBudget" | "appendBudget">,
): void {
  const m = g.metrics.registry;
  m.gauge("mqtt_connections", "Open MQTT connections", () => g.registry.size);
  sendRetryGauge(m, () => g.backend.remote?.resendCounters());
  sendHistograms(m, g.backend.remote?.watchSends);
  watchRetention(g.backend, g.metrics, g.logger); // its counters and log line
  m.gauge(
    "mqtt_outbound_queue_bytes",
    "Bytes queued to subscribers, all clients",
    () => budgets.outboundBudget.bytes,
  );
  const appends = budgets.appendBudget;
  m.gauge("log_pending_appends", "Messages waiting for the backend", () => appends.pending);
  readerGauges(m, () => g.delivery.readerStats());
}
