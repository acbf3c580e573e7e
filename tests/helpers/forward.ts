/**
 * The forwarder's settings for tests: small batches, short waits, so a test sees many sends
 * and retries in little time.
 *
 * @module
 */
import type { ForwarderOptions } from "../../src/forward/options.ts";

/** Forwarder settings for tests; `overrides` win. */
export function testForwarderOptions(overrides: Partial<ForwarderOptions> = {}): ForwarderOptions {
  return {
    gatewayId: "edge-7",
    batchMaxMessages: 64,
    batchMaxBytes: 1 << 20,
    lingerMs: 5,
    retryMaxMs: 50,
    durableTopics: true,
    upstreamName: "test upstream",
    ...overrides,
  };
}
