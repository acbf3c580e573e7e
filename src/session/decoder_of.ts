/**
 * The read side's edges: the decoder of a new connection, with the bounds and protocol levels
 * of the configuration (made once per configuration and shared by every connection: memory per
 * idle connection is a benchmark floor), and how a failed read is counted and logged.
 *
 * @module
 */
import { type DecoderLimits, PacketDecoder, type ProtocolLevels } from "../codec/decoder.ts";
import { ProtocolError } from "../codec/errors.ts";
import { PartialPacketBudget, PartialPacketsFullError } from "../codec/partial_packets.ts";
import { PacketType } from "../codec/packets.ts";
import type { GatewayConfig } from "../config/types.ts";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import type { SessionContext } from "./context.ts";

export type { PacketDecoder };

const shared = new WeakMap<GatewayConfig, readonly [DecoderLimits, ProtocolLevels]>();

/**
 * A decoder for one connection under `config` (`limits.*`, `listeners.mqtt_versions`), holding
 * the bytes of partly received packets within `budget`.
 */
export function decoderFor(config: GatewayConfig, budget: PartialPacketBudget): PacketDecoder {
  let bounds = shared.get(config);
  if (bounds === undefined) {
    const l = config.limits;
    const versions = config.listeners.mqtt_versions ?? ["3.1.1", "5"];
    bounds = [
      {
        maxPacketBytes: l.max_packet_bytes,
        maxConnectPacketBytes: l.max_connect_packet_bytes,
        maxTopicBytes: l.max_topic_bytes,
        maxTopicLevels: l.max_topic_levels,
        maxUserProperties: l.max_user_properties ?? 32,
        topicAliasMaximum: l.max_topic_aliases ?? 0,
      },
      { v4: versions.includes("3.1.1"), v5: versions.includes("5") },
    ];
    shared.set(config, bounds);
  }
  return new PacketDecoder(bounds[0], bounds[1], budget);
}

/**
 * The budget of every connection's partly received packets
 * (`limits.max_partial_packet_bytes_total`), with its gauge.
 */
export function partialPacketBudget(config: GatewayConfig, metrics: GatewayMetrics) {
  const budget = new PartialPacketBudget(config.limits.max_partial_packet_bytes_total);
  metrics.registry.gauge(
    "mqtt_partial_packet_bytes",
    "Bytes held in partly received packets, all connections",
    () => budget.held,
  );
  return budget;
}

/** Counts and logs what ended a read: a protocol violation (`rejected` for a PUBLISH) or an error. */
export function countReadError(
  ctx: Pick<SessionContext, "logger" | "metrics">,
  err: unknown,
  clientId: string | null,
  remote: string,
  closed: boolean,
): void {
  if (err instanceof PartialPacketsFullError) {
    ctx.metrics.partialPacketsRefused.inc();
    ctx.logger.limited("warn", "Partly received packets at their bound; closing connection", {
      client_id: clientId,
      remote,
      error: err.message,
    });
  } else if (err instanceof ProtocolError) {
    ctx.metrics.protocolErrors.inc({ rule: err.rule });
    if (err.packetType === PacketType.PUBLISH) ctx.metrics.outcome.rejected.inc();
    ctx.logger.limited("warn", "Protocol violation; closing connection", {
      client_id: clientId,
      remote,
      error: err.message,
    });
  } else if (!closed) {
    ctx.logger.debug("Connection read failed", { client_id: clientId, error: err });
  }
}
