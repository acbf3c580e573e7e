/**
 * The forwarder as the configuration asks for it (`forward.enabled`), with its upstream Iggy
 * from `[iggy]` and its gauges on `/metrics`.
 *
 * @module
 */
import type { GatewayConfig } from "../config/types.ts";
import type { ForwardRetention } from "../log/embedded/options.ts";
import type { LogBackend } from "../log/port.ts";
import { isLocalLog } from "../log/local_log.ts";
import { loadIggy } from "../log/load_iggy.ts";
import type { Logger } from "../observe/logger.ts";
import type { Metrics } from "../observe/metrics.ts";
import { Forwarder, type ForwardTarget, type UpstreamOpener } from "./forwarder.ts";
import { FORWARD_CONSUMER } from "./lane.ts";

/** What the embedded log keeps for the forwarder; undefined when forwarding is off. */
export function forwardRetention(config: GatewayConfig): ForwardRetention | undefined {
  if (!config.forward.enabled) return undefined;
  return { consumer: FORWARD_CONSUMER, whenFull: config.forward.when_full };
}

/**
 * The forwarder of `local`, its gauges registered; null when forwarding is off (or the log is
 * not the embedded one: a test's stand-in).
 */
export function forwarderFor(
  config: GatewayConfig,
  local: LogBackend,
  logger: Logger,
  metrics: Metrics,
): Forwarder | null {
  if (!config.forward.enabled || !isLocalLog(local)) return null;
  const f = config.forward;
  const forwarder = new Forwarder(local, iggyOpener(config, logger), {
    gatewayId: config.gateway.id,
    batchMaxMessages: f.batch_max_messages,
    batchMaxBytes: f.batch_max_bytes,
    lingerMs: f.linger_ms,
    retryMaxMs: config.iggy.reconnect_max_ms,
    durableTopics: config.log.auto_create_durability === "fsync",
    upstreamName: `Iggy at ${config.iggy.address}`,
  }, logger);
  registerGauges(metrics, forwarder);
  return forwarder;
}

/** Opens an Iggy backend whose sends are the forwarder's large batches. */
function iggyOpener(config: GatewayConfig, logger: Logger): UpstreamOpener {
  const f = config.forward;
  const iggy = {
    ...config.iggy,
    batch_max_messages: f.batch_max_messages,
    batch_max_bytes: f.batch_max_bytes,
    batch_linger_ms: 0,
  };
  const auth = { patUsername: config.auth.pat_username, cacheTtlMs: config.auth.cache_ttl_ms };
  return () => openIggy(iggy, auth, logger, config.limits.max_packet_bytes);
}

/**
 * An open Iggy backend on `iggy` (`[iggy]`, perhaps with other batch settings), its polls sized
 * for messages of `maxMessageBytes` (the forwarder's read-back); one that cannot
 * connect is closed again and the open's error thrown. The client is imported only here: an
 * embedded gateway without forwarding never loads it.
 */
export async function openIggy(
  iggy: GatewayConfig["iggy"],
  auth: { readonly patUsername: string; readonly cacheTtlMs: number },
  logger?: Logger,
  maxMessageBytes?: number,
): Promise<ForwardTarget> {
  const { IggyBackend } = await loadIggy();
  const upstream = new IggyBackend(iggy, auth, { logger, maxMessageBytes });
  try {
    await upstream.open();
    return upstream;
  } catch (e) {
    await upstream.close().catch(() => {});
    throw e;
  }
}

function registerGauges(m: Metrics, fw: Forwarder): void {
  m.gauge("forward_uplink_up", "1 while the upstream Iggy is connected", () => {
    return fw.status().up ? 1 : 0;
  });
  m.gauge("forward_lag_messages", "Messages appended locally, not yet confirmed upstream", () => {
    return fw.status().lagMessages;
  });
  m.gauge("forward_lag_bytes", "Bytes of the records not yet confirmed upstream", () => {
    return fw.status().lagBytes;
  });
  m.gauge("forward_lag_seconds", "Age of the oldest message not yet confirmed upstream", () => {
    return fw.status().lagSeconds;
  });
  m.gauge("forward_messages", "Messages since start, by what became of them", () => {
    const c = fw.counters;
    return [
      [{ kind: "sent" }, c.sent],
      [{ kind: "resent" }, c.resent],
      [{ kind: "found_upstream" }, c.foundUpstream],
      [{ kind: "dropped" }, c.dropped],
      [{ kind: "stray_origin" }, c.strayOrigins],
    ];
  });
  m.gauge("forward_failures", "Failed sends and reads upstream since start", () => {
    return fw.counters.failures;
  });
}
