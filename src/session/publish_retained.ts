/**
 * A PUBLISH with RETAIN [MQTT-3.3.1-5]: after P2–P6 (so setting a retained message needs the
 * same send permission as appending it), the change goes to the retained store first
 * (`stored/retained/retained_store.ts`: appended and read back), then the message is appended to
 * its topic as any PUBLISH. An empty payload clears the topic's retained message
 * [MQTT-3.3.1-10]. Over `limits.max_retained_*` the message is not retained: an MQTT 5 QoS 1 or
 * 2 PUBLISH is refused with PUBACK 0x97 Quota exceeded (nothing appended); a 3.1.1 one (and an
 * MQTT 5 QoS 0 one, which has no PUBACK to carry a refusal) is still appended. Either way it is
 * counted, and logged once per connection.
 *
 * @module
 */
import type { PublishPacket } from "../codec/packets.ts";
import type { RetainedStore } from "../stored/retained/retained_store.ts";
import type { Logger } from "../observe/logger.ts";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import type { Prepared, PreparedAppend } from "./publish.ts";

/** What the retained step needs of the gateway. */
export interface RetainedDeps {
  readonly retained: RetainedStore;
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
}

/** Per connection: whether its first refusal was logged. */
export interface RetainedNotes {
  refusalLogged: boolean;
}

/**
 * Sets (or clears) the retained message of `p`'s topic; what the PUBLISH does next: `r` (append
 * it), or its refusal (MQTT 5 over a bound: denied with 0x97; the store failed: failed).
 */
export async function keepRetained(
  deps: RetainedDeps,
  p: PublishPacket,
  r: PreparedAppend,
  v5: boolean,
  clientId: string,
  notes: RetainedNotes,
): Promise<Prepared> {
  let why;
  try {
    why = await deps.retained.put(p.topic, r.message);
  } catch (err) {
    return { kind: "failed", reason: `retained store: ${(err as Error)?.message ?? err}` };
  }
  if (why === null) return r;
  deps.metrics.retainedRefused.inc();
  const refused = v5 && p.qos > 0;
  if (!notes.refusalLogged) {
    notes.refusalLogged = true;
    deps.logger.warn("Retained message not retained: limit reached", {
      client_id: clientId,
      topic: p.topic,
      limit: `limits.${why}`,
      appended: !refused,
    });
  }
  if (!refused) return r;
  return { kind: "denied", reason: `limits.${why} reached`, cause: "quota_exceeded" };
}
