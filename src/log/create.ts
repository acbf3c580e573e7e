/**
 * Builds the configured backend adapter.
 *
 * @module
 */
import type { GatewayConfig } from "../config/types.ts";
import { EmbeddedBackend } from "./embedded/mod.ts";
import { IggyBackend } from "./iggy/mod.ts";
import type { LogBackend } from "./port.ts";

/** The backend `gateway.backend` names. */
export function createBackend(config: GatewayConfig): LogBackend {
  if (config.gateway.backend === "iggy") {
    return new IggyBackend(config.iggy, {
      patUsername: config.auth.pat_username,
      cacheTtlMs: config.auth.cache_ttl_ms,
    });
  }
  return new EmbeddedBackend({
    path: config.embedded.path,
    users: config.users,
    maxStoreBytes: config.embedded.max_store_bytes,
    retentionMaxAgeSeconds: config.log.retention_max_age_s,
    retentionMaxTopicBytes: config.log.retention_max_topic_bytes,
    retentionIntervalMs: config.log.retention_interval_ms,
    maxAppendBatch: config.limits.max_append_batch,
    writerThread: config.embedded.writer_thread,
  });
}
