/**
 * What an offline stored session holds (issue 18: "10,000 stored sessions of one subscription
 * each cost ≤ 2 KB each while offline"): once its client has gone, a stored session is plain
 * data — client id, filters with QoS (and MQTT 5 options), the triples it has positions on, its
 * expiry — and nothing of the connection is left in the gateway: no client queue, no
 * subscription in the router, no reader kept for it, no timer of its own (expiry is one sweep for
 * every session). The memory figure itself is the `stored_sessions` benchmark.
 */
import assert from "node:assert/strict";
import { connectPacket, RawClient, startGateway, waitFor } from "../helpers/gateway.ts";
import { opts, subscribe } from "./_subscribe_helpers.ts";

/** The fields a stored session may have: none of them is connection-scoped. */
const STORED_FIELDS = new Set([
  "clientId",
  "owner",
  "subscriptions",
  "options",
  "triples",
  "expiryS",
  "mqtt5", // whose expiry rule it follows: a boolean
  "offlineSinceMs",
  "savedAtMs",
  // QoS 2 exchange state (only on sessions that used QoS 2): packet ids, plain numbers.
  "qos2Received",
  "qos2Out",
]);

/** True when `v` is a string, number or null, or a Map/Set/array made only of them. */
function plainData(v: unknown): boolean {
  if (v === null || v === undefined || typeof v === "string" || typeof v === "number") return true;
  if (typeof v === "boolean") return true;
  if (v instanceof Map) return [...v].every(([k, x]) => plainData(k) && plainOptions(x));
  if (v instanceof Set || Array.isArray(v)) return [...v].every(plainData);
  return false;
}

/** A stored MQTT 5 option set is a small record of numbers and booleans. */
function plainOptions(v: unknown): boolean {
  if (plainData(v)) return true;
  if (typeof v !== "object" || v === null || Object.getPrototypeOf(v) !== Object.prototype) {
    return false;
  }
  return Object.values(v).every((x) => typeof x === "boolean" || plainData(x));
}

Deno.test({
  name: "a stored session whose client went offline is plain data; the connection left nothing " +
    "behind in delivery (no queue, no routed subscription, no reader)",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const c = await RawClient.connect(gw.port);
      await c.send(connectPacket("sleepy", { clean: false }));
      const ack = await c.readPacket();
      assert.ok(ack !== null && ack[0] === 0x20 && ack[3] === 0, "CONNACK accepted");
      const filters: [string, number][] = [["sensors/s1/data", 1], ["building/+/room/#", 0]];
      assert.deepEqual(await subscribe(c, filters), [1, 0]);
      assert.ok(gw.view.exactSubscriptions("sensors/s1/data")?.size === 1 && gw.view.hasWildcards);
      assert.ok(gw.view.readers().some((r) => r.subscribers > 0), "its readers while connected");
      await c.send([0xe0, 0x00]); // DISCONNECT
      c.close();
      const s = gw.view.storedSession("sleepy");
      assert.ok(s !== undefined, "the session is stored");
      await waitFor(() => gw.view.connections === 0 && s.offlineSinceMs !== null);

      assert.deepEqual([...s.subscriptions], filters);
      assert.ok(s.triples.size >= 2, "positions on the exact filter's triple and the wildcard's");
      for (const [k, v] of Object.entries(s)) {
        assert.ok(STORED_FIELDS.has(k), `no connection-scoped field on a stored session: "${k}"`);
        assert.ok(plainData(v) || (k === "options" && plainOptions(v)), `"${k}" is plain data`);
      }
      assert.equal(gw.view.subscriptions("sensors/s1/data"), undefined, "no routed subscription");
      assert.equal(gw.view.exactSubscriptions("sensors/s1/data"), undefined);
      assert.equal(gw.view.hasWildcards, false, "the wildcard left the topic trie");
      assert.equal(gw.view.routedTopics().length, 0);
      assert.deepEqual(gw.view.readers().filter((r) => r.subscribers > 0), [], "no reader kept");
      assert.equal(gw.view.storedSessionCount, 1);
    } finally {
      await gw.stop();
    }
  },
});
