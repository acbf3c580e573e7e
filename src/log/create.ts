/**
 * Builds the configured backend adapter.
 *
 * @module
 */
import type { GatewayConfig } from "../config/types.ts";
import { EmbeddedBackend } from "./embedded/mod.ts";
import type { ForwardRetention } from "./embedded/options.ts";
import type { LogBackend } from "./port.ts";
import type { Logger } from "../observe/logger.ts";
import { loadIggy } from "./load_iggy.ts";

/**
 * The backend `gateway.backend` names (`forward`: what the embedded log keeps for the
 * forwarder). The Iggy client is loaded only in Iggy mode (`load_iggy.ts`): its module graph
 * (and the XXH3 WebAssembly it seals frames with) is memory an embedded gateway would carry for
 * nothing.
 */
export async function createBackend(
  config: GatewayConfig,
  logger?: Logger,
  forward?: ForwardRetention,
): Promise<LogBackend> {
  if (config.gateway.backend === "iggy") {
    const { IggyBackend } = await loadIggy();
    return new IggyBackend(config.iggy, {
      patUsername: config.auth.pat_username,
      cacheTtlMs: config.auth.cache_ttl_ms,
    }, { logger, maxMessageBytes: config.limits.max_packet_bytes });
  }
  return new EmbeddedBackend({
    path: config.embedded.path,
    users: config.users,
    maxStoreBytes: config.embedded.max_store_bytes,
    maxMessageBytes: config.limits.max_packet_bytes,
    retentionMaxAgeSeconds: config.log.retention_max_age_s,
    retentionMaxTopicBytes: config.log.retention_max_topic_bytes,
    retentionIntervalMs: config.log.retention_interval_ms,
    maxAppendBatch: config.limits.max_append_batch,
    qos0SyncMs: config.embedded.qos0_sync_ms,
    commitLingerMs: config.embedded.commit_linger_ms,
    writerThread: config.embedded.writer_thread,
    forward,
  });
}
