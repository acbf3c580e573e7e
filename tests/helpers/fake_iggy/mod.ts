/**
 * A fake Iggy cluster for tests of the 0.12 client (and 0.11 for comparison): a shared
 * {@link FakeStore} and one or more {@link FakeNode}s speaking one dialect each.
 *
 * @module
 */
export { FakeNode, type FakeNodeOptions, type HookAction } from "./node.ts";
export { FakeStore } from "./store.ts";
export type { FakeDialect, FakeRequest } from "./wire.ts";

import type { GatewayConfig } from "../../../src/config/types.ts";

/** An `[iggy]` config for a backend under test (short timeouts, one connection). */
export function fakeIggyConfig(
  overrides: Partial<GatewayConfig["iggy"]> = {},
): GatewayConfig["iggy"] {
  return {
    address: "127.0.0.1:1",
    protocol: "auto",
    username: "iggy",
    password: "iggy",
    token: "",
    tls: false,
    tls_ca_file: "",
    tls_server_name: "",
    request_timeout_ms: 1000,
    pool_size: 1,
    heartbeat_interval_ms: 0,
    reconnect_max_ms: 50,
    batch_max_messages: 100,
    batch_max_bytes: 1 << 20,
    batch_linger_ms: 0,
    metadata_refresh_ms: 1000,
    ...overrides,
  };
}
