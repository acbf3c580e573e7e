import assert from "node:assert/strict";
import { DecodeError } from "../bytes.ts";
import { deferredPollBody } from "./deferred_poll.ts";
import { advanceSequence } from "./producer.ts";
import { decodeRoute, RouteCache } from "./route.ts";

const route = {
  incarnation: 1n,
  ownerGeneration: 0n,
  metadataOp: 1n,
  view: 0,
  partitionsCount: 1,
  primaryReplica: 0,
};

Deno.test("RouteCache drops the oldest route at its bound", () => {
  const c = new RouteCache(2);
  c.set("a", route);
  c.set("b", route);
  c.set("c", route);
  assert.equal(c.size, 2);
  assert.equal(c.get("a"), undefined);
  assert.ok(c.get("c"));
  c.invalidate("c");
  assert.equal(c.get("c"), undefined);
  c.invalidate();
  assert.equal(c.size, 0);
});

Deno.test("decodeRoute() refuses a reply that is not exactly 25 bytes", () => {
  assert.throws(() => decodeRoute(new Uint8Array(24)), DecodeError);
  assert.throws(() => decodeRoute(new Uint8Array(26)), DecodeError);
});

Deno.test("deferredPollBody() clamps the wait to 600 s and max_bytes to at least 344", () => {
  const b = deferredPollBody(new Uint8Array(0), { waitMs: 10_000_000, minCount: 0, maxBytes: 1 });
  const v = new DataView(b.buffer);
  assert.equal(v.getBigUint64(0, true), 600_000_000n);
  assert.equal(v.getUint32(8, true), 1);
  assert.equal(v.getUint32(12, true), 344);
  assert.equal(v.getBigUint64(16, true), 601_000_000n);
});

Deno.test("advanceSequence() wraps past 2^31 - 1 to 0", () => {
  assert.equal(advanceSequence(5, 3), 8);
  assert.equal(advanceSequence(0x7fff_fffe, 2), 0);
});
