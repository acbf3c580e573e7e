/**
 * A failed append of a PUBLISH batch, as the operator sees it: counted, logged once per kind at
 * the right level (rate-limited), its QoS 0 messages dropped and counted by reason. The PUBACKs
 * of its QoS 1 and 2 messages are the appender's (`publish_acks.ts` `failurePuback`).
 *
 * @module
 */
import { BackendError, type PartitionAddress } from "../log/port.ts";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import type { Logger } from "../observe/logger.ts";

/** What a full store's refusal is logged as, per bound: each its own rate-limited line. */
const REFUSED_LINE = {
  max_store_bytes: "Appends refused: the message log is at embedded.max_store_bytes",
  disk: "Appends refused: the disk holding the store is full",
  catalog: "Appends refused: the store's catalog is full",
  full: "Appends refused: the log is full",
} as const;

/**
 * A failed append, counted and logged: a full store is a state the operator frees (one warn
 * line per bound, rate-limited), anything else an error. Its QoS 0 messages (`slots` -1) are
 * dropped and counted by reason: MQTT has no acknowledgement to refuse them with, and closing
 * the connection would only make the device reconnect into the same full store [DESIGN: a full
 * disk is a state, not a retry loop].
 */
export function noteFailedAppend(
  ctx: { readonly metrics: GatewayMetrics; readonly logger: Logger },
  address: PartitionAddress,
  slots: readonly number[],
  err: unknown,
): void {
  let qos0 = 0;
  for (const slot of slots) if (slot < 0) qos0++;
  const full = err instanceof BackendError && err.code === "full" ? err.bound ?? "full" : null;
  if (qos0 > 0) ctx.metrics.qos0NotStored.inc({ reason: full ?? "append_failed" }, qos0);
  const fields = { stream: address.stream, topic: address.topic, qos0_dropped: qos0 };
  if (full !== null) {
    ctx.logger.limited("warn", REFUSED_LINE[full], { ...fields, reason: (err as Error).message });
  } else ctx.logger.limited("error", "Append failed; no PUBACK", { ...fields, error: err });
}
