/**
 * Composition root: listeners → connection pipeline → backend, and the way out through
 * delivery. Start, drain, reload, stop.
 *
 * @module
 */
import { parseAddress } from "./config/load.ts";
import type { GatewayConfig } from "./config/types.ts";
import { type CompiledMap, constantTargets } from "./mapping/mod.ts";
import { createBackend } from "./log/create.ts";
import type { LogBackend } from "./log/port.ts";
import { isLocalLog } from "./log/local_log.ts";
import { Delivery } from "./delivery/mod.ts";
import { readiness } from "./http/health.ts";
import { type HttpServer, serveHttp } from "./http/server.ts";
import { consoleRoutes } from "./http/console_routes.ts";
import type { MqttListener } from "./net/listeners.ts";
import { reloadSecureListeners } from "./net/mqtt_listener.ts";
import { GatewayMetrics } from "./observe/gateway_metrics.ts";
import { registerGatewayGauges } from "./gateway_gauges.ts";
import { Logger } from "./observe/logger.ts";
import { AppendBudget } from "./session/append_budget.ts";
import { partialPacketBudget } from "./session/decoder_of.ts";
import { Authenticator } from "./session/auth.ts";
import { type Clock, systemClock } from "./base/clock.ts";
import { within } from "./base/within.ts";
import { Connection } from "./session/connection.ts";
import type { SessionContext } from "./session/context.ts";
import { DeadlineWheel } from "./base/deadline_wheel.ts";
import { OutboundBudget } from "./session/outbox.ts";
import type { MapSource } from "./session/publish.ts";
import { ConnectionRegistry } from "./session/registry.ts";
import { TakeoverWatch } from "./session/takeover_watch.ts";
import { SourceGuard } from "./session/source_guard.ts";
import {
  bindTcp,
  bindWs,
  claimWatchFor,
  deliveryOptions,
  dropUnmapped,
  loadForward,
  loadMap,
  openBackend,
  publishPreparer,
  refusalLog,
  refuseListenerChanges,
  retainedStore,
  sourceGuardOptions,
  storedSessions,
} from "./wiring.ts";
import type { StoredSessions } from "./session/stored_sessions.ts";
import type { RetainedStore } from "./stored/retained/retained_store.ts";
import type { Transport } from "./session/transport.ts";
import { WillPublisher } from "./session/will.ts";
import { EarlyRefusals } from "./session/refuse_early.ts";
import { DurabilityWatch } from "./log/durability_watch.ts";
import { ClockWatch } from "./log/clock_watch.ts";
import type { Forwarder } from "./forward/forwarder.ts";
// Type-only imports: `deno run` does not load the modules for them.
import type * as ForwardFromConfig from "./forward/from_config.ts";
import type * as TlsWiring from "./tls_wiring.ts";
import { type BackendUplink, backendUplink, type Uplink } from "./log/uplink_watch.ts";

/** Replacements for tests. */
export interface GatewayOverrides {
  readonly backend?: LogBackend;
  readonly logger?: Logger;
  readonly clock?: Clock;
  /** Compiled map to use instead of reading `mapping.map_file`. */
  readonly map?: CompiledMap;
}

/** Bound addresses after start. */
export interface BoundPorts {
  readonly tcp: number | null;
  readonly tls: number | null;
  readonly http: number | null;
  readonly ws?: number | null;
  readonly wss?: number | null;
}

export { loadMap } from "./wiring.ts";

/** The TLS listener's wiring, loaded from a URL built at run time (see `tls_wiring.ts`). */
function loadTlsWiring(): Promise<typeof TlsWiring> {
  return import(new URL("./tls_wiring.ts", import.meta.url).href);
}

/** The gateway. */
export class Gateway {
  readonly config: GatewayConfig;
  readonly metrics = new GatewayMetrics();
  readonly logger: Logger;
  readonly backend: LogBackend;
  readonly registry: ConnectionRegistry;
  readonly delivery: Delivery;
  readonly maps: { current: CompiledMap } & MapSource;
  /** Topics that acknowledge before their disk (Iggy without fsync). */
  readonly durability: DurabilityWatch;
  /** Stored sessions (clean session 0): subscriptions and positions kept in the log. */
  readonly sessions: StoredSessions;
  /** Retained messages: the last retained PUBLISH per topic, kept in the log. */
  readonly retained: RetainedStore;
  /** Forward mode: copies the embedded log to the upstream Iggy; null otherwise. */
  readonly forwarder: Forwarder | null;
  /** The uplink (the forwarder's upstream, or Iggy itself); null for a plain embedded log. */
  readonly uplink: Uplink | null;
  #backendUplink: BackendUplink | null;
  #ctx: SessionContext;
  #deadlines: DeadlineWheel;
  #listeners: MqttListener[] = [];
  #http: HttpServer | null = null;
  #connections = new Set<Connection>();
  #stopping = false;
  /** Sockets over a connection limit: MQTT 5 clients get CONNACK 0x97 / 0x9F first. */
  #refusals: EarlyRefusals;
  #started = false;
  #clockWatch: ClockWatch | undefined;

  private constructor(
    config: GatewayConfig,
    map: CompiledMap,
    backend: LogBackend,
    o: GatewayOverrides,
    forward: typeof ForwardFromConfig | null,
  ) {
    this.config = config;
    this.logger = o.logger ?? new Logger(config.gateway.log_level);
    this.backend = backend;
    this.maps = { current: map };
    this.durability = new DurabilityWatch(this.logger);
    const clock = o.clock ?? systemClock;
    const l = config.limits;
    this.registry = new ConnectionRegistry(l.max_connections, new TakeoverWatch(this.logger));
    this.#refusals = new EarlyRefusals(config.listeners.mqtt_versions.includes("5"));
    this.#deadlines = new DeadlineWheel(clock);
    const preparer = publishPreparer(config, backend, this.maps, this.durability, o.clock);
    this.sessions = storedSessions(config, this.backend, this.metrics, this.logger);
    this.retained = retainedStore(config, this.backend, this.metrics, this.logger);
    this.forwarder = forward?.forwarderFor(config, backend, this.logger, this.metrics.registry) ??
      null;
    const bytesOut = (n: number) => this.metrics.bytesOut.inc({}, n);
    const outboundBudget = new OutboundBudget(l.max_outbound_queue_bytes, bytesOut);
    this.delivery = new Delivery({
      backend: this.backend,
      preparer,
      options: deliveryOptions(config),
      budget: outboundBudget,
      deadlines: this.#deadlines,
      clock,
      metrics: this.metrics,
      logger: this.logger,
      sessions: this.sessions,
      retained: this.retained,
    });
    this.#ctx = {
      config,
      backend: this.backend,
      authenticator: Authenticator.of(config, this.backend),
      preparer,
      registry: this.registry,
      delivery: this.delivery,
      metrics: this.metrics,
      logger: this.logger,
      refusalLog: refusalLog(this.logger, this.metrics, clock),
      deadlines: this.#deadlines,
      clock,
      outboundBudget,
      appendBudget: new AppendBudget(l.max_pending_appends),
      partialPackets: partialPacketBudget(config, this.metrics),
      wills: new WillPublisher(),
      sourceGuard: new SourceGuard(sourceGuardOptions(config), clock),
      sessions: this.sessions,
      retained: this.retained,
    };
    this.#backendUplink = backendUplink(backend, config.iggy, this.logger, this.#ctx.appendBudget);
    this.uplink = this.forwarder?.uplinkState ?? this.#backendUplink?.state ?? null;
    registerGatewayGauges(this, this.#ctx);
  }

  /** Builds a gateway: compiles the map (refusing a bad one) and creates the backend. */
  static async create(config: GatewayConfig, o: GatewayOverrides = {}): Promise<Gateway> {
    const map = o.map ?? await loadMap(config);
    const logger = o.logger ?? new Logger(config.gateway.log_level);
    const forward = await loadForward(config);
    const retention = forward?.forwardRetention(config);
    const backend = o.backend ?? await createBackend(config, logger, retention);
    return new Gateway(config, map, backend, { ...o, logger }, forward);
  }

  /**
   * Opens the backend, binds listeners and HTTP; resolves with the bound ports. An operator's
   * problem (port in use, unreadable file, store outside the permission set) rejects with a
   * one-line OperatorError; whatever had opened by then is closed again.
   */
  async start(): Promise<BoundPorts> {
    try {
      return await this.#start();
    } catch (err) {
      for (const l of this.#listeners) l.close();
      this.#listeners = [];
      await this.#http?.close();
      this.#http = null;
      await this.forwarder?.stop();
      await this.backend.close().catch(() => {});
      await this.#clockWatch?.close();
      this.#ctx.refusalLog.close();
      throw err;
    }
  }

  async #start(): Promise<BoundPorts> {
    const c = this.config;
    // HTTP first, so /health answers (and /ready says why not) while the backend opens.
    if (c.listeners.http !== "") {
      const a = parseAddress("listeners.http", c.listeners.http);
      this.#http = serveHttp(a.hostname, a.port, {
        readiness: () => this.readiness(),
        metricsText: () => this.metrics.registry.toPrometheus(),
        ...consoleRoutes(this),
      });
    }
    this.#clockWatch = await ClockWatch.open(c, this.logger, this.metrics);
    this.#ctx.authenticator.useTokens(await Authenticator.readTokens(c));
    await openBackend(c, this.backend);
    await this.#clockWatch.start(this.backend);
    await this.sessions.load();
    this.sessions.start();
    const claimDeps = { ...this.#ctx, positionsStored: this.delivery.positionsStored };
    this.#ctx.claims = await claimWatchFor(c, this.backend.kind, claimDeps);
    this.#ctx.claims?.start();
    await this.retained.load();
    this.retained.start();
    await this.forwarder?.start();
    await this.#checkDurability(this.maps.current);
    const accept = (listener: string) => (t: Transport) => this.#accept(t, listener);
    if (c.listeners.tcp !== "") this.#listeners.push(await bindTcp(c, this.#ctx, accept("tcp")));
    if (c.listeners.tls !== "") {
      const { bindTls } = await loadTlsWiring();
      this.#listeners.push(await bindTls(c, this.#ctx, accept("tls")));
    }
    this.#listeners.push(...await bindWs(c, this.#ctx, accept));
    this.#deadlines.start();
    this.#backendUplink?.start(); // last: nothing after it can fail the start
    this.#started = true;
    const port = (k: string) => this.#listeners.find((l) => l.kind === k)?.port ?? null;
    const [tcp, tls, ws, wss] = [port("tcp"), port("tls"), port("ws"), port("wss")];
    const ports = { tcp, tls, ws, wss, http: this.#http?.port ?? null };
    this.logger.info("Gateway started", {
      gateway_id: c.gateway.id,
      backend: this.backend.kind,
      ...(this.backend.health().detail ? { backend_detail: this.backend.health().detail } : {}),
      ...ports,
      tcp_socket_layer: this.#listeners.find((l) => l.kind === "tcp")?.layer ?? null,
      rules: this.maps.current.rules.length,
    });
    // Started all the same (reads and subscriptions are served), but say why /ready is 503.
    const health = this.backend.health();
    if (!health.ready) this.logger.warn("Backend not ready at start", { reason: health.reason });
    if (c.auth.allow_anonymous) {
      this.logger.warn("Anonymous MQTT clients are allowed", {
        from: c.auth.anonymous_sources,
        rights: c.anonymous_permissions === null ? c.auth.anonymous_permissions : "[anonymous]",
      });
    }
    return ports;
  }

  /** Readiness for /ready. */
  readiness() {
    return readiness({
      listenersBound: this.#started && this.#listeners.length > 0,
      stopping: this.#stopping,
      backend: this.backend.health(),
      warnings: this.durability.warnings(),
      uplink: this.forwarder?.status(),
    });
  }

  /**
   * Warns about mapped topics that already exist and acknowledge before their disk: the
   * default target and every rule whose stream and topic are constants (templates with
   * captures are seen when first published to). A backend that cannot answer is skipped.
   */
  async #checkDurability(map: CompiledMap): Promise<void> {
    for (const t of constantTargets(map)) {
      this.durability.note(await this.backend.getTopic(t.stream, t.topic).catch(() => null));
    }
  }

  /**
   * Hands the gateway one transport, as a listener does on accept: the seam for session tests
   * over in-memory transports (`tests/helpers/memory_transport.ts`).
   */
  accept(t: Transport): void {
    this.#accept(t);
  }

  /** Accepts one transport (listeners and in-memory tests) from `listener` (a metrics label). */
  #accept(t: Transport, listener = "tcp"): void {
    this.metrics.connectionsAccepted.inc({ listener });
    if (!this.#ctx.sourceGuard.admit(t.remoteAddress)) {
      this.metrics.connectionsRefused.inc({ reason: "rate_per_source" });
      const why = "connection rate from this source exceeded";
      const rate = this.config.limits.max_connection_rate_per_source;
      this.#ctx.refusalLog.refuse(t.remoteAddress, listener, why, { max_per_second: rate });
      return this.#refusals.refuse(t, 0x9f, why);
    }
    const conn = new Connection(t, this.#ctx);
    if (this.#stopping || !this.registry.admit(conn)) {
      const reason = this.#stopping ? "stopping" : "max_connections";
      this.metrics.connectionsRefused.inc({ reason });
      if (this.#stopping) return t.close();
      const max = this.config.limits.max_connections;
      this.#ctx.refusalLog.refuse(t.remoteAddress, listener, "max_connections reached", { max });
      return this.#refusals.refuse(t, 0x97, "max_connections reached");
    }
    conn.start(this.#connections);
  }

  /**
   * SIGHUP: recompiles the topic map, users/ACL, token keys and TLS material from `next` (a fresh
   * config). The map is compiled, token keys and TLS files read first, so a failure there leaves
   * the old set in force; then the secure listeners take the new material one at a time (tls, then wss:
   * a wss rebind closes its open connections, and a failure there leaves the tls swap in place
   * and the map and users old). New CONNECTs use the new users; subscriptions whose resolution
   * changed are re-resolved.
   */
  async reload(next: GatewayConfig): Promise<void> {
    refuseListenerChanges(this.config, next);
    const [map, tokens] = await Promise.all([loadMap(next), Authenticator.readTokens(next)]);
    const secure = this.#listeners.filter((l) => l.reloadTls !== undefined); // tls and wss
    const tls = secure.length > 0
      ? await (await loadTlsWiring()).readTlsMaterial(next.listeners)
      : null;
    if (tls !== null) await reloadSecureListeners(secure, tls);
    if (isLocalLog(this.backend)) this.backend.setUsers(next.users);
    this.#ctx.authenticator.reload(next.auth, next.anonymous_permissions, tokens);
    const previous = this.maps.current;
    this.maps.current = map;
    await this.#checkDurability(map);
    const moved = await this.delivery.reresolve(previous);
    await dropUnmapped(this.retained, this.#ctx.preparer, this.logger);
    this.logger.info("Configuration reloaded", {
      rules: map.rules.length,
      map: map.source,
      users: next.users.length,
      tls_reloaded: tls !== null,
      subscriptions_reresolved: moved,
    });
  }

  /**
   * Graceful stop, bounded as a whole by `gateway.drain_timeout_ms`: stop accepting; appends in
   * flight finish and send their PUBACKs (for up to half the bound); each client is told why
   * (MQTT 5: 0x8B, or 0x9C and `mqtt5.server_reference`) and closed; then reader offsets,
   * session positions and records, wills and the forwarder's send in flight are stored and the
   * store closes. What is not stored at the bound is said once; the stop resolves all the same,
   * and a stored session resumes elsewhere from its last stored position (copies again, not gaps).
   */
  async stop(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    const bound = this.config.gateway.drain_timeout_ms;
    const started = performance.now();
    for (const l of this.#listeners) l.close();
    // Before connections close: their unacknowledged deliveries must not be struck.
    this.delivery.beginStop();
    await within(Promise.all([...this.#connections].map((c) => c.drain())), bound / 2);
    const undrained = this.#connections.size;
    for (const c of this.#connections) c.stopped();
    const stored = await within(this.#storeAndClose(), started + bound - performance.now());
    if (!stored) {
      this.logger.error(
        "Stop reached gateway.drain_timeout_ms before positions and records were stored; stored sessions resume from their last stored positions",
        { drain_timeout_ms: bound, connections_undrained: undrained },
      );
    }
    this.#deadlines.stop();
    this.#backendUplink?.stop();
    await this.#clockWatch?.close();
    await this.#http?.close();
    this.#ctx.refusalLog.close(); // what the rate limit held back is reported, not lost
    this.logger.info("Gateway stopped", { stop_ms: Math.round(performance.now() - started) });
  }

  /** What a stop stores, in order, then the store's close. */
  async #storeAndClose(): Promise<void> {
    // The closed connections' wills go into the log before it closes.
    await this.#ctx.wills.idle();
    await this.delivery.stop();
    this.#ctx.claims?.stop();
    await this.sessions.stop();
    await this.retained.stop();
    await this.forwarder?.stop();
    await this.backend.close();
  }
}
