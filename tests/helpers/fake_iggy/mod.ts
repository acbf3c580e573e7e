/**
 * The fake Iggy: a cluster for tests of the client over sockets, in both dialects (a shared
 * {@link FakeStore} and one or more {@link FakeNode}s speaking one dialect each); `frames.ts`
 * and `records.ts` are the same fake at the level of single frames and metadata records, for
 * the unit tests of one connection.
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
