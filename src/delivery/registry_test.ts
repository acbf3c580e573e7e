import assert from "node:assert/strict";
import { type Subscription, SubscriptionRegistry, tripleKey } from "./registry.ts";

function sub(client: string, qos: 0 | 1, match = ""): Subscription<string> {
  const wildcard = match.includes("+") || match.includes("#");
  return { client, qos, startOffsets: new Map([["k", 0]]), match, prefix: "", wildcard };
}

Deno.test("SubscriptionRegistry.lookup() finds every client of an exact topic and nothing else", () => {
  const r = new SubscriptionRegistry<string>();
  r.upsert(sub("a", 1), "t/1");
  r.upsert(sub("b", 0), "t/1");
  r.upsert(sub("a", 0), "t/2");
  assert.deepEqual([...r.lookup("t/1")!.keys()], ["a", "b"]);
  assert.deepEqual([...r.lookup("t/2")!.keys()], ["a"]);
  assert.equal(r.lookup("t/+"), undefined, "no wildcard matching");
  assert.equal(r.lookup("t"), undefined);
  assert.equal(r.countFor("a"), 2);
  assert.equal(r.countFor("b"), 1);
  assert.equal(r.countFor("c"), 0);
  assert.deepEqual(r.topics().sort(), ["t/1", "t/2"]);
});

Deno.test("SubscriptionRegistry.upsert() of the same client and topic replaces [MQTT-3.8.4-3]", () => {
  const r = new SubscriptionRegistry<string>();
  r.upsert(sub("a", 1), "t");
  r.upsert(sub("a", 0), "t");
  assert.equal(r.lookup("t")!.size, 1);
  assert.equal(r.get("a", "t")!.qos, 0);
  assert.equal(r.countFor("a"), 1);
});

Deno.test("SubscriptionRegistry.remove() drops empty topic and client entries", () => {
  const r = new SubscriptionRegistry<string>();
  const s = sub("a", 1);
  r.upsert(s, "t");
  r.upsert(sub("b", 1), "t");
  assert.equal(r.remove("a", "nope"), undefined);
  assert.equal(r.remove("c", "t"), undefined);
  assert.equal(r.remove("a", "t"), s);
  assert.equal(r.remove("a", "t"), undefined, "second remove finds nothing");
  assert.deepEqual([...r.lookup("t")!.keys()], ["b"]);
  assert.equal(r.countFor("a"), 0);
  r.remove("b", "t");
  assert.equal(r.lookup("t"), undefined);
  assert.deepEqual(r.topics(), []);
});

Deno.test("SubscriptionRegistry.removeClient() returns every subscription of the client with its topic", () => {
  const r = new SubscriptionRegistry<string>();
  r.upsert(sub("a", 1), "t/1");
  r.upsert(sub("a", 0), "t/2");
  r.upsert(sub("b", 1), "t/2");
  const out = r.removeClient("a");
  assert.deepEqual(out.map(([t, s]) => [t, s.qos]), [["t/1", 1], ["t/2", 0]]);
  assert.equal(r.lookup("t/1"), undefined);
  assert.deepEqual([...r.lookup("t/2")!.keys()], ["b"]);
  assert.deepEqual(r.removeClient("a"), []);
});

Deno.test("tripleKey() differs for every field and is stable", () => {
  const keys = new Set([
    tripleKey({ stream: "s", topic: "t", partition: 0 }),
    tripleKey({ stream: "s", topic: "t", partition: 1 }),
    tripleKey({ stream: "s", topic: "u", partition: 0 }),
    tripleKey({ stream: "r", topic: "t", partition: 0 }),
    tripleKey({ stream: "s_t", topic: "", partition: 0 }),
  ]);
  assert.equal(keys.size, 5);
  assert.equal(
    tripleKey({ stream: "s", topic: "t", partition: 2 }),
    tripleKey({ partition: 2, topic: "t", stream: "s" }),
  );
});

Deno.test("SubscriptionRegistry indexes exact filters by hash and wildcard filters in the trie", () => {
  const r = new SubscriptionRegistry<string>();
  r.upsert(sub("a", 1, "b/n/r/1"), "b/n/r/1");
  r.upsert(sub("b", 1, "b/+/r/#"), "b/+/r/#");
  assert.equal(r.exact("b/n/r/1")!.size, 1);
  assert.ok(r.hasWildcards);
  const hits: string[] = [];
  r.matchWildcards("b/s/r/2", (s) => hits.push(s.client));
  assert.deepEqual(hits, ["b"]);
  r.remove("b", "b/+/r/#");
  assert.ok(!r.hasWildcards, "removing the last wildcard empties the trie");
  r.remove("a", "b/n/r/1");
  assert.equal(r.exact("b/n/r/1"), undefined);
});
