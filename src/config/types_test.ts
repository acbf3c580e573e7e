/**
 * The config's type is derived from the key table: these lines compile only while every
 * table and key is there with its value type, and the `@ts-expect-error` ones only while a
 * wrong value is a type error (`deno task typecheck` checks them; the test itself is trivial).
 */
import assert from "node:assert/strict";
import { loadConfig } from "./load.ts";
import type { GatewayConfig } from "./types.ts";

Deno.test("GatewayConfig is derived from the key table: keys, enums and value types", () => {
  const c: GatewayConfig = loadConfig({ text: "", source: "t.toml", env: {} });
  const layer: "auto" | "epoll" | "node" = c.listeners.tcp_socket_layer;
  const backend: "embedded" | "iggy" = c.gateway.backend;
  const port: number = c.limits.max_packet_bytes;
  const versions: readonly string[] = c.listeners.mqtt_versions;
  const anonymous: boolean = c.auth.allow_anonymous;
  // @ts-expect-error: not one of the enum's values
  const wrong: GatewayConfig["listeners"]["tcp_socket_layer"] = "io_uring";
  // @ts-expect-error: no such key
  c.limits.max_packet_byte;
  // @ts-expect-error: an int key is a number
  const text: string = c.limits.max_connections;
  assert.deepEqual([layer, backend, port, versions, anonymous], [
    "auto",
    "embedded",
    1_048_576,
    ["3.1.1", "5"],
    false,
  ]);
  assert.ok(wrong !== undefined && text !== undefined);
});
