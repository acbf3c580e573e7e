/**
 * SharedReader.offerAppended routes a just-appended batch from memory; the routed messages are
 * held until every subscriber settles them, so their payloads must not pin a shared block of
 * decoded payloads (`base/byte_blocks.ts`).
 */
import assert from "node:assert/strict";
import { copyBytes } from "../base/byte_blocks.ts";
import type { LogBackend, StoredMessage } from "../log/port.ts";
import { GatewayMetrics } from "../observe/gateway_metrics.ts";
import { Logger } from "../observe/logger.ts";
import { SharedReader } from "./reader.ts";

Deno.test("SharedReader.offerAppended routes payloads that own their stores, not views of a shared block", () => {
  const routed: StoredMessage[] = [];
  const backend: Pick<LogBackend, "poll" | "storeOffset" | "nextOffset"> = {
    poll: () => Promise.reject(new Error("an offered batch is routed without a poll")),
    storeOffset: () => Promise.resolve(),
    nextOffset: () => Promise.reject(new Error("no subscription joins in this test")),
  };
  const reader = new SharedReader({ stream: "s", topic: "t", partition: 0 }, 0, {
    backend,
    options: {
      consumer: "c",
      pollBatch: 10,
      commitIntervalMs: 1000,
      commitBatchCount: 1000,
      maxUnsettled: 100,
    },
    route: (_r, batch) => {
      routed.push(...batch);
      return undefined;
    },
    metrics: new GatewayMetrics(),
    logger: new Logger("error", () => {}),
    growth: null,
  });
  const shared = copyBytes(new Uint8Array([1, 2, 3]), 0, 3);
  assert.notEqual(shared.buffer.byteLength, 3, "the test's payload is carved from a block");
  const headers = new Map([["mqtt.topic", "a/b"]]);
  reader.offerAppended(0, [{ payload: shared, headers }]);
  assert.equal(routed.length, 1);
  assert.deepEqual([...routed[0].payload], [1, 2, 3]);
  assert.equal(routed[0].payload.buffer.byteLength, 3, "its own store");
  assert.equal(reader.position, 1);
});
