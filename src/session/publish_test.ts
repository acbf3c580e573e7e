import assert from "node:assert/strict";
import type { PublishPacket } from "../codec/packets.ts";
import { ALL_GLOBAL_PERMISSIONS } from "../access/permissions.ts";
import type { LogBackend, Principal } from "../log/port.ts";
import { TopicCache } from "../log/topic_cache.ts";
import { compileMap } from "../mapping/mod.ts";
import { type PreparedAppend, PublishPreparer } from "./publish.ts";

const ROOT: Principal = {
  username: "root",
  permissions: { global: ALL_GLOBAL_PERMISSIONS, streams: new Map() },
};

/** A preparer over a map with defaults only, whose target topic has `partitions` partitions. */
function preparer(
  partitions: number,
  placesBalanced = false,
  rules = "",
): PublishPreparer {
  const map = compileMap(
    'default_stream = "sensors"\ndefault_topic = "messages_default"\n' + rules,
    "test.toml",
  );
  const backend: Pick<LogBackend, "getTopic" | "createTopic"> = {
    getTopic: (stream, topic) => Promise.resolve({ stream, topic, partitions }),
    createTopic: () => Promise.reject(new Error("auto-create is off")),
  };
  const topics = new TopicCache(
    backend,
    {
      autoCreate: false,
      create: { partitions },
      ttlMs: 60_000,
      missTtlMs: 1_000,
      maxEntries: 100,
    } as ConstructorParameters<typeof TopicCache>[1],
    { now: () => 0 },
  );
  return new PublishPreparer({ current: map }, topics, placesBalanced);
}

function publish(topic: string): PublishPacket {
  return {
    type: "publish",
    topic,
    qos: 0,
    retain: false,
    dup: false,
    packetId: 0,
    payload: new Uint8Array([1]),
  };
}

Deno.test("unkeyed publishes are spread round robin per target topic, across MQTT topics", async () => {
  const p = preparer(3);
  const partitions: number[] = [];
  // Two MQTT topics (two resolutions) share the default target: one counter for both.
  for (const topic of ["a/1", "b/2", "a/1", "b/2", "a/1", "b/2"]) {
    const r = (await p.prepare(publish(topic), ROOT, "c")) as PreparedAppend;
    assert.equal(r.kind, "append");
    partitions.push(r.address.partition);
  }
  assert.deepEqual(partitions, [0, 1, 2, 0, 1, 2]);
});

Deno.test("the preparer hands out one shared address object per target partition", async () => {
  const p = preparer(2);
  const seen = [];
  for (let i = 0; i < 4; i++) {
    seen.push(((await p.prepare(publish("x"), ROOT, "c")) as PreparedAppend).address);
  }
  assert.equal(seen[0], seen[2]);
  assert.equal(seen[1], seen[3]);
  assert.notEqual(seen[0], seen[1]);
  assert.deepEqual(seen[1], { stream: "sensors", topic: "messages_default", partition: 1 });
});

Deno.test("MQTT topics mapped to one target partition share its address object", async () => {
  const p = preparer(2);
  const seen = [];
  for (const topic of ["fleet/1/data", "fleet/2/data", "fleet/3/data", "fleet/4/data"]) {
    seen.push(((await p.prepare(publish(topic), ROOT, "c")) as PreparedAppend).address);
  }
  // Round robin over both partitions across the four topics: one object per partition.
  assert.equal(seen[0], seen[2]);
  assert.equal(seen[1], seen[3]);
  assert.notEqual(seen[0], seen[1]);
  assert.deepEqual(seen[2], { stream: "sensors", topic: "messages_default", partition: 0 });
});

Deno.test("when the backend places unkeyed messages, they share one balanced address per topic", async () => {
  const p = preparer(3, true);
  const addresses = [];
  for (const topic of ["a/1", "a/1", "a/1"]) {
    const r = (await p.prepare(publish(topic), ROOT, "c")) as PreparedAppend;
    addresses.push(r.address);
  }
  // One object: a read's unkeyed messages stay one batch, in arrival order.
  assert.equal(addresses[0], addresses[1]);
  assert.equal(addresses[1], addresses[2]);
  assert.equal(addresses[0].balancedOver, 3);
});

Deno.test("a resolution to an invalid Iggy name is denied at every publish, and a valid one still appends", async () => {
  // The name check is kept with the cached resolution: the second publish must be denied too.
  const rule = "[[rule]]\nmqtt_topic = 'long/([^/]+)'\nstream = 's'\ntopic = 't_$1'\n";
  const p = preparer(1, false, rule);
  const long = `long/${"x".repeat(300)}`;
  for (let i = 0; i < 2; i++) {
    const r = await p.prepare(publish(long), ROOT, "c");
    assert.equal(r.kind, "denied", `publish ${i + 1}`);
    assert.match(
      (r as { reason: string }).reason,
      /resolved topic "t_x+…" is not a valid Iggy name/,
    );
  }
  assert.equal((await p.prepare(publish("long/ok"), ROOT, "c")).kind, "append");
});
