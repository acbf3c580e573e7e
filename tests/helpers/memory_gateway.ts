/**
 * Test harness for session logic without sockets: the real gateway over a temporary embedded
 * store, with no listener bound; each client is an in-memory transport pair handed to
 * `Gateway.accept`.
 *
 * @module
 */
import assert from "node:assert/strict";
import { loadConfig } from "../../src/config/load.ts";
import { createBackend } from "../../src/log/create.ts";
import type { LogBackend } from "../../src/log/port.ts";
import { Gateway } from "../../src/gateway.ts";
import { GatewayView } from "../../src/gateway_view.ts";
import { compileMap } from "../../src/mapping/mod.ts";
import { Logger } from "../../src/observe/logger.ts";
import { type MemoryClient, memoryTransportPair } from "./memory_transport.ts";
import { connectPacket, DESIGN_MAP, testEnv } from "./gateway.ts";

/** A started gateway reachable only through memory transports. */
export interface MemoryGateway {
  readonly gateway: Gateway;
  /** What the gateway holds and counts, read-only: tests read state here, not in `gateway`. */
  readonly view: GatewayView;
  readonly logs: string[];
  /** A new client connection from `remoteAddress` (no CONNECT sent yet). */
  open(remoteAddress?: string): MemoryClient;
  /** A new client from loopback that sent CONNECT as `clientId` and read an accepting CONNACK. */
  connect(clientId: string): Promise<MemoryClient>;
  stop(): Promise<void>;
}

/** Options for {@link startMemoryGateway}. */
export interface MemoryGatewayOptions {
  /** Extra TOML for the config (e.g. `[[users]]`). */
  readonly toml?: string;
  /** Env overlay (IGGY_MQTT_*). */
  readonly env?: Record<string, string>;
  readonly map?: string;
  /** Wraps the embedded backend the gateway is given (a test's probe of the port). */
  readonly wrapBackend?: (backend: LogBackend) => LogBackend;
}

/** Starts a gateway with anonymous access from loopback and auto_create on, no listeners. */
export async function startMemoryGateway(o: MemoryGatewayOptions = {}): Promise<MemoryGateway> {
  const dir = await Deno.makeTempDir({ prefix: "iggy-mqtt-memory-" });
  const env = testEnv(dir, { IGGY_MQTT_LISTENERS_HTTP: "", ...o.env });
  const loaded = loadConfig({ text: o.toml ?? "", source: "test.toml", env });
  // A valid config names a listener; this gateway binds none (clients come through accept()).
  const config = { ...loaded, listeners: { ...loaded.listeners, tcp: "", tls: "" } };
  const logs: string[] = [];
  const logger = new Logger(config.gateway.log_level, (l) => logs.push(l));
  const backend = o.wrapBackend ? o.wrapBackend(await createBackend(config, logger)) : undefined;
  const gateway = await Gateway.create(config, {
    logger,
    map: compileMap(o.map ?? DESIGN_MAP, "test-map.toml"),
    backend,
  });
  await gateway.start();
  let stopped = false;
  const open = (remoteAddress = "127.0.0.1") => {
    const { transport, client } = memoryTransportPair(remoteAddress);
    gateway.accept(transport);
    return client;
  };
  return {
    gateway,
    view: new GatewayView(gateway),
    logs,
    open,
    async connect(clientId) {
      const c = open();
      c.send(connectPacket(clientId));
      assert.deepEqual([...(await c.readPacket())!], [0x20, 2, 0, 0], "CONNACK, accepted");
      return c;
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await gateway.stop();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}
