import assert from "node:assert/strict";
import type { EmbeddedBackend } from "../../log/embedded/mod.ts";
import { openTestStore } from "../../../tests/helpers/embedded_store.ts";
import { envelope } from "../envelope.ts";
import { Logger } from "../../observe/logger.ts";
import { RetainedStore, type RetainedStoreOptions, SNAPSHOT_CONSUMER } from "./retained_store.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

async function withBackend(fn: (b: EmbeddedBackend) => Promise<void>): Promise<void> {
  await using t = await openTestStore({ writerThread: "in-process" });
  await fn(t.backend);
}

function store(b: EmbeddedBackend, o: Partial<RetainedStoreOptions> = {}): RetainedStore {
  return new RetainedStore(b, {
    stream: "mqtt_gateway",
    topic: "retained",
    pollIntervalMs: 0,
    maxMessages: 100_000,
    maxBytes: 64 << 20,
    maxMessageBytes: 1 << 20,
    ...o,
  }, new Logger("error", () => {}));
}

function retained(topic: string, body: string, qos: 0 | 1 | 2 = 1) {
  return envelope(topic, enc.encode(body), qos, "dev", 1, true);
}

function payloads(s: RetainedStore, filter: string): string[] {
  return [...s.matching(filter)].map((m) =>
    `${m.headers.get("mqtt.topic")}=${dec.decode(m.payload)}`
  )
    .sort();
}

Deno.test("RetainedStore: sets, replaces and clears per topic; a new instance reads the same set", async () => {
  await withBackend(async (b) => {
    const a = store(b);
    assert.equal(await a.load(), true);
    assert.equal(await a.put("home/a", retained("home/a", "1")), null);
    assert.equal(await a.put("home/b", retained("home/b", "2")), null);
    assert.equal(await a.put("home/a", retained("home/a", "3")), null);
    assert.deepEqual(payloads(a, "home/#"), ["home/a=3", "home/b=2"]);
    assert.equal(await a.put("home/b", retained("home/b", "")), null); // empty: clears
    assert.deepEqual(payloads(a, "home/+"), ["home/a=3"]);
    assert.deepEqual(payloads(a, "home/a"), ["home/a=3"]);
    assert.deepEqual(payloads(a, "other/#"), []);
    const again = store(b);
    await again.load();
    assert.deepEqual(payloads(again, "#"), ["home/a=3"]);
    assert.equal(again.set.size, 1);
  });
});

Deno.test("RetainedStore: two gateways on one log agree, whoever wrote last wins", async () => {
  await withBackend(async (b) => {
    const a = store(b);
    const c = store(b);
    await a.load();
    await c.load();
    await a.put("t", retained("t", "from a"));
    assert.deepEqual(payloads(c, "t"), []); // c has not read yet
    await c.sync();
    assert.deepEqual(payloads(c, "t"), ["t=from a"]);
    await c.put("t", retained("t", "")); // c clears; a sees it at its next read
    await a.sync();
    assert.deepEqual(payloads(a, "#"), []);
  });
});

Deno.test("RetainedStore: bounds refuse a new topic over max_retained_messages, bytes or message size; replacing stays allowed", async () => {
  await withBackend(async (b) => {
    const s = store(b, { maxMessages: 2, maxBytes: 400, maxMessageBytes: 200 });
    await s.load();
    assert.equal(await s.put("a", retained("a", "x")), null);
    assert.equal(await s.put("b", retained("b", "x")), null);
    assert.equal(await s.put("c", retained("c", "x")), "max_retained_messages");
    assert.equal(await s.put("a", retained("a", "y")), null); // a known topic: replaced
    assert.equal(await s.put("a", retained("a", "z".repeat(300))), "max_retained_message_bytes");
    assert.equal(await s.put("b", retained("b", "")), null); // a clear frees a slot
    assert.equal(await s.put("c", retained("c", "x")), null);
    assert.deepEqual(payloads(s, "#"), ["a=y", "c=x"]);
    const small = store(b, { maxMessages: 1 }); // a lowered bound: the rest is counted, not kept
    await small.load();
    assert.equal(small.set.size, 1);
    assert.equal(small.counters.overBound, 2); // b when it was set, and c
  });
});

Deno.test("RetainedStore: a start reads the latest snapshot and the changes after it, not the history", async () => {
  await withBackend(async (b) => {
    const a = store(b);
    await a.load();
    for (let i = 0; i < 2500; i++) {
      const t = `dev/${i % 20}`;
      assert.equal(await a.put(t, retained(t, String(i))), null);
    }
    await a.put("dev/0", retained("dev/0", "")); // cleared after the snapshots
    await a.stop();
    const address = { stream: "mqtt_gateway", topic: "retained", partition: 0 };
    assert.notEqual(await b.getOffset(SNAPSHOT_CONSUMER, address), null);
    const fresh = store(b);
    await fresh.load();
    assert.equal(fresh.set.size, 19);
    assert.deepEqual(payloads(fresh, "dev/19"), ["dev/19=2499"]);
    assert.deepEqual(payloads(fresh, "dev/0"), []);
    // Bounded by the live set: a snapshot of 20 entries and at most 1,001 changes after it.
    assert.ok(fresh.lastLoad.snapshotEntries <= 20, JSON.stringify(fresh.lastLoad));
    assert.ok(fresh.lastLoad.changes <= 1001, JSON.stringify(fresh.lastLoad));
  });
});

Deno.test("RetainedStore: a clear another gateway writes between snapshots stays cleared at the next start", async () => {
  await withBackend(async (b) => {
    const a = store(b);
    const other = store(b);
    await a.load();
    await other.load();
    await a.put("x", retained("x", "old"));
    for (let i = 0; i < 1001; i++) await a.put("y", retained("y", String(i)));
    // The other gateway clears x; `a` has not read it when its snapshot (due now) is taken.
    await other.sync();
    await other.put("x", retained("x", ""));
    await a.put("y", retained("y", "last"));
    await a.stop();
    const fresh = store(b);
    await fresh.load();
    assert.deepEqual(payloads(fresh, "#"), ["y=last"]);
  });
});

Deno.test("RetainedStore: Message Expiry is honoured on retained messages", async () => {
  await withBackend(async (b) => {
    let now = Date.now();
    const s = store(b, { now: () => now });
    await s.load();
    const m = envelope("e", enc.encode("soon gone"), 1, "dev", 1, true, false, {
      messageExpiry: 5,
    });
    await s.put("e", m);
    assert.deepEqual(payloads(s, "e"), ["e=soon gone"]);
    now += 6000;
    assert.deepEqual(payloads(s, "e"), []);
    assert.equal(s.set.size, 0);
  });
});

Deno.test("RetainedStore: every byte value of a payload comes back as it was set", async () => {
  await withBackend(async (b) => {
    const s = store(b);
    await s.load();
    const all = Uint8Array.from({ length: 20_000 }, (_, i) => (i * 7) % 256);
    await s.put("bin", envelope("bin", all, 1, "dev", 1, true));
    assert.deepEqual([...s.matching("bin")][0].payload, all);
    const again = store(b);
    await again.load();
    assert.deepEqual([...again.matching("bin")][0].payload, all);
    assert.equal([...again.matching("bin")][0].headers.get("mqtt.packet_id"), undefined);
  });
});
