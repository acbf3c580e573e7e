import assert from "node:assert/strict";
import type { ClientQueue } from "./client_queue.ts";
import type { StoredMessage } from "../log/port.ts";
import type { Subscription } from "./registry.ts";
import { dedupe, liveTargetOf } from "./targets.ts";

/** A 3.1.1 client's queue, as far as targets read it. */
function plainClient(): ClientQueue {
  return { sub: { v5: null, clientId: "c" } } as unknown as ClientQueue;
}

function subscription(
  client: ClientQueue,
  qos: 0 | 1 | 2,
  match: string,
): Subscription<ClientQueue> {
  return {
    client,
    qos,
    startOffsets: new Map(),
    match,
    prefix: "",
    wildcard: match.includes("+") || match.includes("#"),
  };
}

const message = { offset: 0, headers: new Map() } as unknown as StoredMessage;

Deno.test("a 3.1.1 subscription's live target is made once per copy QoS and shared", () => {
  const s = subscription(plainClient(), 1, "a/b");
  const first = liveTargetOf(s, message, 1);
  assert.equal(liveTargetOf(s, message, 2), first, "a QoS 2 message is copied at QoS 1 here");
  assert.equal(first!.qos, 1);
  const qos0 = liveTargetOf(s, message, 0);
  assert.notEqual(qos0, first);
  assert.equal(qos0!.qos, 0);
  assert.ok(Object.isFrozen(first));
});

Deno.test("overlapping 3.1.1 subscriptions merge into a copy, never into a shared target", () => {
  const client = plainClient();
  const exact = subscription(client, 0, "a/b");
  const wild = subscription(client, 1, "a/+");
  const shared0 = liveTargetOf(exact, message, 1)!;
  const shared1 = liveTargetOf(wild, message, 1)!;
  const merged = dedupe([shared0, shared1]);
  assert.equal(merged.length, 1);
  assert.equal(merged[0].qos, 1, "the highest QoS of the matching subscriptions");
  assert.notEqual(merged[0], shared0);
  assert.equal(shared0.qos, 0, "the shared target is unchanged");
  assert.equal(liveTargetOf(exact, message, 1), shared0);
});
