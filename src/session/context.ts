/**
 * Everything a connection shares with the rest of the gateway, gathered in one object the
 * composition root builds. The connection holds it; each handler takes only the part it uses,
 * named where it is used (`PublishContext`, `AppendContext`, `ConnectContext`, `ClaimContext`,
 * `SubscribeContext`, `WireContext`, `WillContext`).
 *
 * @module
 */
import type { GatewayConfig } from "../config/types.ts";
import type { LogBackend } from "../log/port.ts";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import type { Logger } from "../observe/logger.ts";
import type { RefusalLog } from "../observe/refusal_log.ts";
import type { AppendBudget } from "./append_budget.ts";
import type { PartialPacketBudget } from "../codec/partial_packets.ts";
import type { Authenticator } from "./auth.ts";
import type { Clock } from "../base/clock.ts";
import type { DeadlineWheel } from "../base/deadline_wheel.ts";
import type { DeliveryPort } from "./delivery_port.ts";
import type { OutboundBudget } from "./outbox.ts";
import type { PublishPreparer } from "./publish.ts";
import type { ConnectionRegistry } from "./registry.ts";
import type { SourceGuard } from "./source_guard.ts";
import type { StoredSessions } from "./stored_sessions.ts";
import type { WillPublisher } from "./will.ts";
import type { RetainedStore } from "../stored/retained/retained_store.ts";
import type { ClaimWatch } from "./session_claims.ts";

/** Shared services of every connection. */
export interface SessionContext {
  readonly config: GatewayConfig;
  readonly backend: LogBackend;
  readonly authenticator: Authenticator;
  readonly preparer: PublishPreparer;
  readonly registry: ConnectionRegistry;
  readonly delivery: DeliveryPort;
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
  /** One rate-limited warn line per refused connection. */
  readonly refusalLog: RefusalLog;
  readonly deadlines: DeadlineWheel;
  readonly clock: Clock;
  readonly outboundBudget: OutboundBudget;
  readonly appendBudget: AppendBudget;
  /** Bytes of partly received packets, all connections (`limits.max_partial_packet_bytes_total`). */
  readonly partialPackets: PartialPacketBudget;
  readonly sourceGuard: SourceGuard;
  readonly wills: WillPublisher;
  readonly sessions: StoredSessions;
  /** Claims of client ids across gateways (Iggy mode), made at start; absent: alone. */
  claims?: ClaimWatch;
  /** Retained messages; absent: RETAIN is stored as a header only (tests that need no store). */
  readonly retained?: RetainedStore;
}
