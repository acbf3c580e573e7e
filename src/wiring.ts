/**
 * The composition root's wiring: the options each part is built with, derived from the
 * configuration in one place, so `gateway.ts` reads as the assembly of parts.
 *
 * @module
 */
import { fileAccessError, readOperatorFile } from "./config/files.ts";
import { ConfigError } from "./config/errors.ts";
import type { GatewayConfig } from "./config/types.ts";
import type { DeliveryOptions } from "./delivery/mod.ts";
import type { LogBackend, TopicInfo } from "./log/port.ts";
import { TopicCache, type TopicCacheOptions } from "./log/topic_cache.ts";
import type { DurabilityWatch } from "./log/durability_watch.ts";
import { type Clock, oncePerRun, systemClock } from "./base/clock.ts";
import { type MapSource, PublishPreparer } from "./session/publish.ts";
import { type CompiledMap, compileMap } from "./mapping/mod.ts";
import type { SourceGuardOptions } from "./session/source_guard.ts";
import { type StoredSessionOptions, StoredSessions } from "./session/stored_sessions.ts";
// Type-only imports: `deno run` does not load the modules for them.
import type * as SessionClaims from "./session/session_claims.ts";
import type * as ForwardFromConfig from "./forward/from_config.ts";
import { COMPACT_MAX_AGE_MS } from "./session/session_compaction.ts";
import { retainedOptionsOf, RetainedStore } from "./stored/retained/retained_store.ts";
import type { GatewayMetrics } from "./observe/gateway_metrics.ts";
import type { Logger } from "./observe/logger.ts";
import { RefusalLog } from "./observe/refusal_log.ts";
import { type AcceptHandler, listenTcp, type MqttListener } from "./net/listeners.ts";
import { listenWs } from "./net/ws_listener.ts";
import type { ProxyOptions, ProxyRefused } from "./net/proxy_transport.ts";
import { IpBlockSet } from "./base/ip.ts";
import { parseAddress } from "./config/load.ts";

/** Reads and compiles the topic map named by the config. */
export async function loadMap(config: GatewayConfig): Promise<CompiledMap> {
  const path = config.mapping.map_file;
  return compileMap(await readOperatorFile("mapping.map_file", path), path);
}

/** The publish path's topic cache: auto-create from `[log]`, bounded entries. */
export function topicCacheOptions(
  config: GatewayConfig,
  onFound: (info: TopicInfo | null) => void,
): TopicCacheOptions {
  return {
    autoCreate: config.log.auto_create,
    create: {
      partitions: config.log.auto_create_partitions,
      messageExpiryMicros: config.log.retention_max_age_s * 1_000_000,
      maxTopicBytes: config.log.retention_max_topic_bytes,
      durable: config.log.auto_create_durability === "fsync",
    },
    ttlMs: 60_000,
    missTtlMs: 1_000,
    maxEntries: 10_000,
    onFound,
  };
}

/**
 * The publish path's preparer over a topic cache of `backend`; the topics found go to
 * `durability`. Asked once per PUBLISH: the system clock is read once per run (a test's clock
 * as is).
 */
export function publishPreparer(
  config: GatewayConfig,
  backend: LogBackend,
  maps: MapSource,
  durability: DurabilityWatch,
  clock: Clock | undefined,
): PublishPreparer {
  const topics = new TopicCache(
    backend,
    topicCacheOptions(config, (info) => durability.note(info)),
    clock === undefined ? oncePerRun(systemClock) : clock,
  );
  return new PublishPreparer(maps, topics, backend.remote?.placesBalanced === true);
}

/** Delivery's identity and bounds from `[gateway]` and `[limits]`. */
export function deliveryOptions(config: GatewayConfig): DeliveryOptions {
  const l = config.limits;
  return {
    consumer: `mqtt-gateway-${config.gateway.id}`,
    pollBatch: l.poll_batch_size,
    commitIntervalMs: l.commit_interval_ms,
    commitBatchCount: l.commit_batch_count,
    maxUnsettled: Math.max(l.poll_batch_size * 64, 100_000),
    maxInflight: l.max_inflight_per_client,
    maxClientBytes: l.max_outbound_queue_bytes_per_client,
    slowConsumerTimeoutMs: l.slow_consumer_timeout_ms,
    resendAfterMs: l.resend_after_ms,
    maxSubscriptionsPerClient: l.max_subscriptions_per_client,
    maxTriplesPerSubscription: l.max_triples_per_subscription,
    maxReplayMessages: l.max_replay_messages,
    maxShareGroups: l.max_share_groups,
    maxShareMembers: l.max_share_members,
    hiddenTargets: [
      { stream: config.session.store_stream, topic: config.session.store_topic },
      { stream: config.retained.stream, topic: config.retained.topic },
    ],
    maxTopicBytes: l.max_topic_bytes,
    maxTopicLevels: l.max_topic_levels,
  };
}

/** Per-source defences from `[limits]` and `[auth]`. */
export function sourceGuardOptions(config: GatewayConfig): SourceGuardOptions {
  return {
    connectionsPerSecond: config.limits.max_connection_rate_per_source,
    failureBackoffMs: config.auth.failure_backoff_ms,
    failureBackoffMaxMs: config.auth.failure_backoff_max_ms,
    freeFailures: config.auth.failure_free_attempts,
  };
}

/** Stored sessions from `[session]` and `[limits]`; `onExpired`/`onEvicted` count removals. */
export function storedSessionOptions(
  config: GatewayConfig,
  onExpired: (n: number) => void,
  onEvicted?: () => void,
): StoredSessionOptions {
  const s = config.session;
  return {
    stream: s.store_stream,
    topic: s.store_topic,
    maxSessions: config.limits.max_stored_sessions,
    // The longest a session may live offline, 3.1.1 or MQTT 5 (the record topic keeps twice it).
    maxExpiryS: Math.max(s.expiry_s, s.max_expiry_s),
    // Read at every expiry check: sessions stored under other settings follow these.
    expiryS: s.expiry_s,
    maxExpiryS5: s.max_expiry_s,
    // Often enough that an expiry is late by a small part of it, at most once a minute.
    sweepIntervalMs: Math.min(60_000, Math.max(100, s.expiry_s * 250)),
    onExpired,
    onEvicted,
    // Restated within half the data's retention by age (an hour at most, a minute at least), so
    // that the records do not hold a segment that retention has emptied for long.
    compactAfterMs: Math.max(
      60_000,
      Math.min(COMPACT_MAX_AGE_MS, config.log.retention_max_age_s * 500 || Infinity),
    ),
  };
}

/** The retained messages of `[retained]` and `[limits]`, in `backend`; its size is a gauge. */
export function retainedStore(
  config: GatewayConfig,
  backend: LogBackend,
  metrics: GatewayMetrics,
  logger: Logger,
): RetainedStore {
  const store = new RetainedStore(backend, retainedOptionsOf(config, backend.kind), logger);
  metrics.registry.gauge(
    "mqtt_retained_messages",
    "Topics with a retained message",
    () => store.set.size,
  );
  metrics.registry.gauge(
    "mqtt_retained_bytes",
    "Bytes of the retained messages (topic + headers + payload)",
    () => store.set.bytes,
  );
  return store;
}

/**
 * A reload: clears the retained messages whose topics no longer map to a valid target (the
 * rest are kept) and names the first 20 of them.
 */
export async function dropUnmapped(
  retained: RetainedStore,
  preparer: PublishPreparer,
  logger: Logger,
): Promise<void> {
  const dropped = await retained.dropWhere((t) => !preparer.hasTarget(t));
  if (dropped.length === 0) return;
  logger.warn("Retained messages dropped: their topics no longer map", {
    count: dropped.length,
    topics: dropped.slice(0, 20),
  });
}

/** The stored sessions of `[session]` and `[limits]`, in `backend`; expiries are counted. */
export function storedSessions(
  config: GatewayConfig,
  backend: LogBackend,
  metrics: GatewayMetrics,
  logger: Logger,
): StoredSessions {
  const expired = (n: number) => metrics.storedSessionsExpired.inc({}, n);
  const evicted = () => metrics.storedSessionsEvicted.inc();
  return new StoredSessions(backend, storedSessionOptions(config, expired, evicted), logger);
}

/**
 * The claims of client ids across gateways: Iggy mode only (an embedded log has one gateway),
 * so their code is loaded from a URL built at run time: `deno run` keeps the source of every
 * module a literal import names.
 */
export async function claimWatchFor(
  config: GatewayConfig,
  backendKind: string,
  deps: Omit<SessionClaims.ClaimWatchDeps, "gatewayId" | "pollIntervalMs" | "waitMs">,
): Promise<SessionClaims.ClaimWatch | undefined> {
  if (backendKind === "embedded") return undefined;
  const claims: typeof SessionClaims = await import(
    new URL("./session/session_claims.ts", import.meta.url).href
  );
  const s = config.session;
  return new claims.ClaimWatch({
    ...deps,
    gatewayId: config.gateway.id,
    pollIntervalMs: s.claim_poll_interval_ms,
    waitMs: s.takeover_wait_ms,
  });
}

/**
 * The forwarder's wiring with `forward.enabled`, loaded from a URL built at run time (as the
 * claims above); null otherwise.
 */
export function loadForward(config: GatewayConfig): Promise<typeof ForwardFromConfig | null> {
  if (!config.forward.enabled) return Promise.resolve(null);
  return import(new URL("./forward/from_config.ts", import.meta.url).href);
}

/**
 * Binds the TCP listener of `listeners.tcp` on `listeners.tcp_socket_layer`: a fallback to
 * node:net is logged, sockets shed for want of file descriptors are counted, and so are
 * connections closed for their PROXY header.
 */
export function bindTcp(
  config: GatewayConfig,
  r: ListenerReports,
  accept: AcceptHandler,
): Promise<MqttListener> {
  const a = parseAddress("listeners.tcp", config.listeners.tcp);
  return listenTcp(a.hostname, a.port, {
    layer: config.listeners.tcp_socket_layer ?? "auto",
    onFallback: (reason) => r.logger.info("TCP listener uses node:net, not epoll", { reason }),
    onShed: () => {
      r.metrics.connectionsRefused.inc({ reason: "fd_limit" });
      r.logger.limited("warn", "Connection refused: out of file descriptors", {});
    },
    proxy: proxyOptions(config, r, "tcp"),
  }, accept);
}

/**
 * The PROXY protocol settings of the `tcp` or `tls` listener, or undefined when
 * `listeners.proxy_protocol_from` is empty; refusals are counted and logged.
 */
export function proxyOptions(
  config: GatewayConfig,
  r: ListenerReports,
  listener: "tcp" | "tls",
): ProxyOptions | undefined {
  const from = config.listeners.proxy_protocol_from;
  if (from.length === 0) return undefined;
  return {
    trusted: new IpBlockSet(from),
    timeoutMs: config.limits.connect_timeout_ms,
    maxPending: config.limits.max_connections,
    onRefused: ({ why, remote, reason }: ProxyRefused) => {
      r.metrics.connectionsRefused.inc({ reason: why, listener });
      r.refusalLog.refuse(remote, listener, reason);
    },
  };
}

/**
 * Binds the WebSocket listeners of `listeners.ws` and `listeners.wss` (the latter with the TLS
 * listener's certificate and key); refused upgrades are counted and logged.
 */
export async function bindWs(
  config: GatewayConfig,
  r: Omit<ListenerReports, "logger">,
  accept: (listener: "ws" | "wss") => AcceptHandler,
): Promise<MqttListener[]> {
  const l = config.listeners;
  const out: MqttListener[] = [];
  const proxies = l.proxy_protocol_from.length > 0
    ? new IpBlockSet(l.proxy_protocol_from)
    : undefined;
  const o = (listener: "ws" | "wss") => ({
    path: l.ws_path,
    allowedOrigins: l.ws_allowed_origins,
    proxies,
    onRefused: (reason: string, remote: string) => {
      r.metrics.connectionsRefused.inc({ reason: "ws_upgrade", listener });
      r.refusalLog.refuse(remote, listener, reason);
    },
  });
  if (l.ws !== "") {
    const a = parseAddress("listeners.ws", l.ws);
    out.push(await listenWs(a.hostname, a.port, o("ws"), accept("ws")));
  }
  if (l.wss !== "") {
    const a = parseAddress("listeners.wss", l.wss);
    const cert = await readOperatorFile("listeners.tls_cert_file", l.tls_cert_file);
    const key = await readOperatorFile("listeners.tls_key_file", l.tls_key_file);
    out.push(
      await listenWs(a.hostname, a.port, { ...o("wss"), tls: { cert, key } }, accept("wss")),
    );
  }
  return out;
}

/** The refusal log: its held-back lines are counted in `mqtt_refusal_log_suppressed_total`. */
export function refusalLog(logger: Logger, metrics: GatewayMetrics, clock: Clock): RefusalLog {
  return new RefusalLog(logger, clock, () => metrics.refusalLinesNotLogged.inc());
}

/** Where a listener reports: refused connections are counted and logged by reason. */
export interface ListenerReports {
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
  readonly refusalLog: RefusalLog;
}

/**
 * Throws a ConfigError naming the first listener key a reload may not change: the listeners ask
 * for (and name) client certificates, and trust balancers, as they were started to; a list of
 * balancers left stale without a word would go on trusting a removed one.
 */
export function refuseListenerChanges(was: GatewayConfig, next: GatewayConfig): void {
  for (const key of ["tls_client_auth", "tls_identity", "proxy_protocol_from"] as const) {
    const [before, after] = [was, next].map((c) => JSON.stringify(c.listeners[key]));
    if (before === after) continue;
    throw new ConfigError(`listeners.${key}`, `changed from ${before} to ${after}: restart`);
  }
}

/**
 * Opens the backend, turning what the operator must fix into one line: an embedded store
 * outside the permission set or on a path the OS refuses, an Iggy CA file that cannot be
 * read (read here first because the Iggy client would report it as "cannot connect"), in
 * Iggy mode and in forward mode alike.
 */
export async function openBackend(c: GatewayConfig, backend: LogBackend): Promise<void> {
  const iggy = c.gateway.backend === "iggy" || c.forward.enabled;
  if (iggy && c.iggy.tls && c.iggy.tls_ca_file !== "") {
    await readOperatorFile("iggy.tls_ca_file", c.iggy.tls_ca_file);
  }
  try {
    await backend.open();
  } catch (err) {
    if (backend.kind !== "embedded") throw err;
    throw fileAccessError(err, "write", "embedded store", c.embedded.path) ?? err;
  }
}
