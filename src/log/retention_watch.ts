/**
 * What retention deletes, made visible: one log line per retention pass that deleted messages
 * (per topic: stream, topic, messages, bytes, and how many stored sessions and `$share` groups
 * had not read all of them), and the `log_retention_deleted_*` counters. Embedded log only: Iggy
 * deletes by its own retention and does not tell its clients.
 *
 * The line is `warn` when a stored session or a share group had not read what went (those
 * clients will never get it), `info` otherwise. At most {@link MAX_TOPICS_NAMED} topics are named
 * in a line; the totals cover all. Passes close together (forward mode runs them on demand) are
 * rate-limited like every repeated line; the counters count every one.
 *
 * @module
 */
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import type { Logger } from "../observe/logger.ts";
import type { LogBackend } from "./port.ts";
import { isLocalLog, type RetentionDeleted } from "./local_log.ts";

/** Most topics a line names. */
export const MAX_TOPICS_NAMED = 20;
/** Consumer names of stored sessions and share groups (`sessionConsumer`, `shareName`). */
const SESSION_PREFIX = "mqtt-session-";
const SHARE_PREFIX = "mqtt-share/";

/** One topic of the line. */
function topicFields(d: RetentionDeleted): Record<string, unknown> {
  const sessions = d.unreadBy.filter((c) => c.startsWith(SESSION_PREFIX)).length;
  const shares = d.unreadBy.filter((c) => c.startsWith(SHARE_PREFIX)).length;
  return {
    stream: d.stream,
    topic: d.topic,
    messages: d.messages,
    bytes: d.bytes,
    unread_sessions: sessions,
    unread_share_groups: shares,
  };
}

/** Whether a stored session or a share group had not read all of `d`. */
function unreadByClients(d: RetentionDeleted): boolean {
  return d.unreadBy.some((c) => c.startsWith(SESSION_PREFIX) || c.startsWith(SHARE_PREFIX));
}

/**
 * Logs and counts what each retention pass of the log on this machine deleted (Iggy deletes by
 * its own retention, unseen by the gateway).
 */
export function watchRetention(
  backend: LogBackend,
  metrics: GatewayMetrics,
  logger: Logger,
): void {
  if (!isLocalLog(backend)) return;
  backend.watchRetention((deleted) => {
    let messages = 0;
    let bytes = 0;
    let unread = false;
    for (const d of deleted) {
      const labels = { unread: unreadByClients(d) ? "yes" : "no" };
      metrics.retentionDeletedMessages.inc(labels, d.messages);
      metrics.retentionDeletedBytes.inc(labels, d.bytes);
      messages += d.messages;
      bytes += d.bytes;
      unread ||= unreadByClients(d);
    }
    if (messages === 0) return;
    const fields = {
      messages,
      bytes,
      topics: deleted.slice(0, MAX_TOPICS_NAMED).map(topicFields),
      ...(deleted.length > MAX_TOPICS_NAMED
        ? { more_topics: deleted.length - MAX_TOPICS_NAMED }
        : {}),
    };
    // Passes on demand (forward mode's room) may follow each other closely: rate-limited.
    if (unread) {
      logger.limited("warn", "Retention deleted messages that clients had not read", fields);
    } else logger.limited("info", "Retention deleted messages", fields);
  });
}
