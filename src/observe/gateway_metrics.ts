/**
 * The gateway's named instruments: one counter per publish outcome, connection
 * and byte counters, PUBACK latency and append batch sizes, delivery and reader figures.
 *
 * @module
 */
import {
  type BoundCounter,
  type Counter,
  type Histogram,
  type Labels,
  Metrics,
} from "./metrics.ts";

/** Publish outcomes, exactly as the design names them. */
export type PublishOutcome = "appended" | "acked" | "rejected" | "denied" | "failed";

/** Buckets of the latency histograms (seconds): PUBACKs, Iggy sends. */
const SECONDS_BUCKETS = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];
/** Buckets of the batch-size histograms (messages): appends, Iggy sends. */
const MESSAGES_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000];

/** Resend counts of an Iggy backend, as the backend port reports them. */
export interface SendRetryCounts {
  readonly resends: number;
  readonly foundStored?: number;
  readonly renewals: number;
  readonly possibleDuplicates: number;
}

/**
 * The `iggy_send_retries` gauge, by kind: resent (written once: 0.12 under its producer stamp,
 * 0.11 after a read-back did not find it), found_stored (0.11 cut sends a read-back found),
 * renewed (0.12 producer ids), possible_duplicate (0.11 cut sends whose read-back or resend
 * failed too). No series without counts.
 */
export function sendRetryGauge(m: Metrics, read: () => SendRetryCounts | undefined): void {
  m.gauge("iggy_send_retries", "Iggy sends since start that were retried, by kind", () => {
    const c = read();
    if (!c) return [];
    const kinds: [Labels, number][] = [
      [{ kind: "resent" }, c.resends],
      [{ kind: "found_stored" }, c.foundStored ?? 0],
      [{ kind: "renewed" }, c.renewals],
      [{ kind: "possible_duplicate" }, c.possibleDuplicates],
    ];
    return kinds;
  });
}

/**
 * `iggy_send_seconds` and `iggy_send_messages`, fed by `watch` (a backend's `watchSends`):
 * how long Iggy takes to confirm a send, and how many messages a send carries. Made only
 * when there is something to watch, so the embedded log shows no empty series.
 */
export function sendHistograms(
  m: Metrics,
  watch: ((observe: (seconds: number, messages: number) => void) => void) | undefined,
): void {
  if (watch === undefined) return;
  const seconds = m.histogram(
    "iggy_send_seconds",
    "Time from a send to Iggy leaving to its confirmation",
    SECONDS_BUCKETS,
  );
  const messages = m.histogram(
    "iggy_send_messages",
    "Messages per send to Iggy",
    MESSAGES_BUCKETS,
  );
  watch((s, n) => {
    seconds.observe(s);
    messages.observe(n);
  });
}

/**
 * Every counter of the gateway, in exposition order, by the field of {@link GatewayMetrics}
 * that holds it: its name and help. A table, so the catalogue of what the gateway counts reads
 * in one place.
 */
const COUNTERS = {
  /** label outcome = appended | acked | rejected | denied | failed */
  publishes: {
    name: "mqtt_publishes_total",
    help: "PUBLISH packets by outcome (appended, acked, rejected, denied, failed)",
  },
  connectionsAccepted: {
    name: "mqtt_connections_accepted_total",
    help: "Sockets accepted, by listener (tcp, tls, ws, wss)",
  },
  connectionsRefused: {
    name: "mqtt_connections_refused_total",
    help: "Sockets or CONNECTs refused, by reason",
  },
  refusalLinesNotLogged: {
    name: "mqtt_refusal_log_suppressed_total",
    help: "Refused connections not logged one by one (rate limit per source and overall)",
  },
  /** Connections closed because of a protocol violation, by rule. */
  protocolErrors: {
    name: "mqtt_protocol_errors_total",
    help: "Connections closed for a protocol violation",
  },
  partialPacketsRefused: {
    name: "mqtt_partial_packet_refused_total",
    help:
      "Connections closed because their read would take the bytes of partly received packets, all connections, past limits.max_partial_packet_bytes_total",
  },
  authFailures: {
    name: "mqtt_auth_failures_total",
    help: "CONNECTs refused by authentication or authorization",
  },
  bytesIn: {
    name: "mqtt_bytes_in_total",
    help: "Bytes read from clients",
  },
  bytesOut: {
    name: "mqtt_bytes_out_total",
    help: "Bytes written to clients",
  },
  keepAliveExpired: {
    name: "mqtt_keepalive_expired_total",
    help: "Connections closed after 1.5x keep-alive of silence, or no CONNECT in time",
  },
  takeovers: {
    name: "mqtt_session_takeovers_total",
    help: "Connections closed because a new connection used the same client id",
  },
  clientIdRefused: {
    name: "mqtt_client_id_refused_total",
    help:
      "CONNECTs refused for their client id (reason=owned_by_another: another principal's live connection or stored session; reason=pattern: client_id_pattern)",
  },
  traceparentMalformed: {
    name: "mqtt_traceparent_malformed_total",
    help:
      "MQTT 5 PUBLISHes whose traceparent user property was not a W3C traceparent (ignored: kept as a plain user property)",
  },
  ruleHits: {
    name: "mqtt_topic_map_hits_total",
    help: "Publishes resolved per topic-map rule (rule=default when none matched)",
  },
  /** QoS 0 messages whose append failed: no acknowledgement can say so, the connection stays. */
  qos0NotStored: {
    name: "mqtt_qos0_not_stored_total",
    help:
      "QoS 0 PUBLISHes dropped because their append failed (outcome failed; the connection stays), by reason: max_store_bytes, disk, catalog (the store full), full (Iggy full), append_failed",
  },
  // Delivery (the way out).
  delivered: {
    name: "mqtt_deliveries_total",
    help: "Copies written to subscribers, by qos",
  },
  resent: {
    name: "mqtt_deliveries_resent_total",
    help: "QoS 1 and 2 copies (and PUBRELs) resent after limits.resend_after_ms without an answer",
  },
  droppedQos0: {
    name: "mqtt_deliveries_dropped_total",
    help: "QoS 0 copies dropped because a queue was over its cap",
  },
  droppedTooLarge: {
    name: "mqtt_deliveries_too_large_total",
    help: "Copies not sent because they exceed the MQTT 5 subscriber's Maximum Packet Size",
  },
  expired: {
    name: "mqtt_messages_expired_total",
    help: "Polled messages not delivered because their MQTT 5 message expiry interval had passed",
  },
  evictions: {
    name: "mqtt_slow_consumer_evictions_total",
    help: "Clients evicted as slow consumers",
  },
  skippedForeign: {
    name: "reader_skipped_messages_total",
    help: "Polled messages without mqtt.topic (non-MQTT producers), skipped",
  },
  polls: {
    name: "reader_polls_total",
    help: "Backend polls by shared readers",
  },
  routed: {
    name: "reader_messages_routed_total",
    help: "Polled messages routed to at least one subscriber",
  },
  offsetCommits: {
    name: "reader_offset_commits_total",
    help: "Consumer offsets stored by shared readers",
  },
  retentionGaps: {
    name: "session_retention_gap_messages_total",
    help: "Messages a stored session or replay skipped because retention had removed them",
  },
  /** Messages a gateway given a share group's partition dealt from the group's position. */
  shareHandover: {
    name: "mqtt_share_handover_messages_total",
    help:
      "Shared subscriptions: messages dealt again from the group's stored position after a partition moved between gateways (at least once)",
  },
  replaySkipped: {
    name: "replay_skipped_messages_total",
    help: "Matching messages a replay passed over after limits.max_replay_messages",
  },
  storedSessionsRefused: {
    name: "session_stored_refused_total",
    help: "Stored sessions refused (max_stored_sessions reached, or the log could not answer)",
  },
  retainedRefused: {
    name: "mqtt_retained_refused_total",
    help:
      "Retained PUBLISHes not retained: over limits.max_retained_* (MQTT 5 QoS 1/2: refused, PUBACK 0x97)",
  },
  retainedDelivered: {
    name: "mqtt_retained_delivered_total",
    help: "Retained messages sent to new subscriptions",
  },
  storedSessionsExpired: {
    name: "session_stored_expired_total",
    help: "Stored sessions removed after their expiry offline",
  },
  storedSessionsEvicted: {
    name: "session_stored_evicted_total",
    help:
      "Stored sessions removed at limits.max_stored_sessions to make room (the one offline the longest first)",
  },
  retentionDeletedMessages: {
    name: "log_retention_deleted_messages_total",
    help:
      "Messages the embedded log's retention deleted (age, topic size, forward mode's room); unread=yes: a stored session or $share group had not read them",
  },
  retentionDeletedBytes: {
    name: "log_retention_deleted_bytes_total",
    help:
      "Bytes (payload and headers) of the messages the embedded log's retention deleted; unread as in log_retention_deleted_messages_total",
  },
} as const;

/** One counter per entry of {@link COUNTERS}, in the field the entry names. */
type Counters = { readonly [Field in keyof typeof COUNTERS]: Counter };

/**
 * The base of {@link GatewayMetrics}: the registry and the counters of {@link COUNTERS}, made
 * in table order (the order `/metrics` lists them). The loop sets exactly the table's fields,
 * which TypeScript cannot follow: hence the cast to what it makes.
 */
const WithCounters = class {
  readonly registry = new Metrics();
  constructor() {
    const fields = this as unknown as Record<string, Counter>;
    for (const [field, { name, help }] of Object.entries(COUNTERS)) {
      fields[field] = this.registry.counter(name, help);
    }
  }
} as new () => { readonly registry: Metrics } & Counters;

/** Every instrument of one gateway. */
export class GatewayMetrics extends WithCounters {
  /** Per-outcome handles of `publishes` (hot path). */
  readonly outcome: Readonly<Record<PublishOutcome, BoundCounter>> = {
    appended: this.publishes.child({ outcome: "appended" }),
    acked: this.publishes.child({ outcome: "acked" }),
    rejected: this.publishes.child({ outcome: "rejected" }),
    denied: this.publishes.child({ outcome: "denied" }),
    failed: this.publishes.child({ outcome: "failed" }),
  };
  #ruleHit = new Map<number | null, BoundCounter>();
  /** The hit counter of a topic-map rule (null = the default), cached per rule. */
  ruleHit(rule: number | null): BoundCounter {
    let c = this.#ruleHit.get(rule);
    if (!c) {
      // Bounded by the number of rules in the loaded maps (cleared when it grows large).
      if (this.#ruleHit.size > 10_000) this.#ruleHit.clear();
      c = this.ruleHits.child({ rule: rule === null ? "default" : String(rule) });
      this.#ruleHit.set(rule, c);
    }
    return c;
  }
  readonly pubackLatency: Histogram = this.registry.histogram(
    "mqtt_puback_latency_seconds",
    "Time from PUBLISH decoded to append confirmed (QoS 1)",
    SECONDS_BUCKETS,
  );
  readonly appendBatch: Histogram = this.registry.histogram(
    "log_append_batch_messages",
    "Messages per append call",
    MESSAGES_BUCKETS,
  );
  /** Handles of `delivered` by QoS (hot path: one increment per copy). */
  readonly deliveredQos: readonly [BoundCounter, BoundCounter, BoundCounter] = [
    this.delivered.child({ qos: "0" }),
    this.delivered.child({ qos: "1" }),
    this.delivered.child({ qos: "2" }),
  ];
}
