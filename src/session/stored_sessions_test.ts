import assert from "node:assert/strict";
import { EmbeddedBackend } from "../log/embedded/mod.ts";
import { NO_WAIT } from "../log/port.ts";
import { Logger } from "../observe/logger.ts";
import { loadHashes } from "../base/xxhash.ts";
import { utf8Length } from "../base/utf8.ts";
import { sessionConsumer, type StoredSessionOptions, StoredSessions } from "./stored_sessions.ts";

const STORE = { store: true, cleanStart: false, expiryS: 60 };
const CLEAN = { store: false, cleanStart: true, expiryS: 60 };

async function withBackend(fn: (b: EmbeddedBackend) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "stored_sessions_test_" });
  const backend = new EmbeddedBackend({
    path: `${dir}/store.db`,
    users: [],
    maxStoreBytes: 64 << 20,
    retentionMaxAgeSeconds: 0,
    retentionMaxTopicBytes: 0,
    retentionIntervalMs: 3_600_000,
    maxAppendBatch: 100,
    writerThread: "in-process",
  });
  await backend.open();
  try {
    await fn(backend);
  } finally {
    await backend.close();
    await Deno.remove(dir, { recursive: true });
  }
}

function sessions(b: EmbeddedBackend, o: Partial<StoredSessionOptions> = {}): StoredSessions {
  return new StoredSessions(b, {
    stream: "mqtt_gateway",
    topic: "sessions",
    maxSessions: 10,
    maxExpiryS: 60,
    expiryS: 60,
    maxExpiryS5: 60,
    sweepIntervalMs: 60_000,
    ...o,
  }, new Logger("error", () => {}));
}

Deno.test("StoredSessions: a session's subscriptions and triples survive into a new instance", async () => {
  await withBackend(async (b) => {
    let now = 1_000_000;
    const a = sessions(b, { now: () => now });
    assert.equal(await a.load(), true);
    const opened = a.open("dev", STORE, "");
    assert.equal(opened.present, false);
    opened.session!.subscriptions.set("a/+", 1);
    opened.session!.triples.add("k");
    a.save(opened.session!);
    now += 5000;
    a.offline(opened.session!);
    await a.idle();
    const b2 = sessions(b, { now: () => now });
    await b2.load();
    const s = b2.get("dev")!;
    assert.deepEqual([...s.subscriptions], [["a/+", 1]]);
    assert.deepEqual([...s.triples], ["k"]);
    assert.equal(s.offlineSinceMs, 1_005_000);
    assert.equal(b2.open("dev", STORE, "").present, true);
  });
});

Deno.test("StoredSessions.open() with a clean start removes the session for every instance [MQTT-3.1.2-6]", async () => {
  await withBackend(async (b) => {
    const a = sessions(b);
    await a.load();
    a.open("dev", STORE, "");
    assert.deepEqual(a.open("dev", CLEAN, ""), { session: null, present: false });
    assert.equal(a.get("dev"), undefined);
    await a.idle();
    const again = sessions(b);
    await again.load();
    assert.equal(again.get("dev"), undefined, "the tombstone is read back");
  });
});

Deno.test("StoredSessions.sweep() removes sessions offline longer than their expiry", async () => {
  await withBackend(async (b) => {
    let now = 0;
    const expired: number[] = [];
    const a = sessions(b, { now: () => now, expiryS: 10, onExpired: (n) => expired.push(n) });
    await a.load();
    const s = a.open("dev", { ...STORE, expiryS: 10 }, "").session!;
    a.offline(s);
    now = 9_999;
    assert.equal(a.sweep(), 0);
    now = 10_000;
    assert.equal(a.sweep(), 1);
    assert.equal(a.get("dev"), undefined);
    assert.deepEqual(expired, [1]);
  });
});

Deno.test("StoredSessions.full() bounds new sessions at max_stored_sessions; loading stops there", async () => {
  await withBackend(async (b) => {
    const a = sessions(b, { maxSessions: 2 });
    await a.load();
    a.open("one", STORE, "");
    a.open("two", STORE, "");
    assert.equal(a.full("three"), true);
    assert.equal(a.full("one"), false, "a known session is not new");
    await a.idle();
    const small = sessions(b, { maxSessions: 1 });
    await small.load();
    assert.equal(small.size, 1);
  });
});

Deno.test("StoredSessions.sync() reads records another gateway wrote", async () => {
  await withBackend(async (b) => {
    const here = sessions(b);
    const there = sessions(b);
    await here.load();
    await there.load();
    there.open("roamer", STORE, "").session!.subscriptions.set("x", 0);
    there.save(there.get("roamer")!);
    await there.idle();
    assert.equal(here.get("roamer"), undefined);
    await here.sync();
    assert.deepEqual([...here.get("roamer")!.subscriptions], [["x", 0]]);
  });
});

Deno.test("sessionConsumer() names a client's positions within Iggy's 255 bytes", async () => {
  await loadHashes();
  assert.equal(sessionConsumer("dev-1"), "mqtt-session-dev-1");
  const long = sessionConsumer("x".repeat(255));
  assert.ok(utf8Length(long) <= 255);
  assert.notEqual(long, sessionConsumer("y".repeat(255)));
});

Deno.test("StoredSessions: a malformed record is skipped and counted; the records after it still load", async () => {
  await withBackend(async (b) => {
    const a = sessions(b);
    assert.equal(await a.load(), true);
    const address = { stream: "mqtt_gateway", topic: "sessions", partition: 0 };
    const bad = ['{"s":[1]}', '{"s":[["a",1]],"t":[3]}', "not json", '{"hello":"foreign"}'];
    await b.append({
      ...address,
      messages: bad.map((text) => ({
        payload: new TextEncoder().encode(text),
        headers: new Map([["mqtt.session", "dev"]]),
      })),
    });
    const s = a.open("dev", STORE, "").session!;
    s.subscriptions.set("a/b", 1);
    a.save(s);
    a.offline(s);
    await a.idle();
    const b2 = sessions(b);
    assert.equal(await b2.load(), true);
    assert.equal(b2.records.malformed, bad.length);
    assert.deepEqual([...b2.get("dev")!.subscriptions], [["a/b", 1]]);
    // And the tail goes on: a record written after them is read by sync().
    const c = a.open("other", STORE, "").session!;
    a.offline(c);
    await a.idle();
    assert.equal(await b2.sync(), true);
    assert.ok(b2.get("other") !== undefined);
  });
});

Deno.test("StoredSessions.sweep() renews only sessions attached here; a remote one left 'connected' expires", async () => {
  await withBackend(async (b) => {
    let shift = 0;
    const now = () => Date.now() + shift;
    const here = sessions(b, { now });
    assert.equal(await here.load(), true);
    const remote = sessions(b, { now }); // a gateway that then vanished without a word
    assert.equal(await remote.load(), true);
    remote.open("dev", STORE, "");
    const mine = here.open("mine", STORE, "").session!;
    await remote.idle();
    assert.equal(await here.sync(), true);
    assert.equal(here.get("dev")!.offlineSinceMs, null);
    shift = 2 * 60_000 + 1000; // past twice max_expiry_s: its gateway would have renewed it
    assert.equal(here.sweep(), 1);
    assert.equal(here.get("dev"), undefined);
    assert.equal(here.get("mine"), mine, "attached here: renewed, kept");
    assert.ok(mine.savedAtMs >= Date.now() + shift - 1000);
  });
});

Deno.test("StoredSessions.sync() shares one tail read among concurrent callers; a latecomer gets a read that starts after its call", async () => {
  await withBackend(async (b) => {
    const here = sessions(b, { maxSessions: 100 });
    const there = sessions(b, { maxSessions: 100 });
    assert.equal(await here.load(), true);
    assert.equal(await there.load(), true);
    for (let i = 0; i < 20; i++) there.open(`dev-${i}`, STORE, "");
    await there.idle();
    let polls = 0;
    const poll = b.poll.bind(b);
    b.poll = (...args) => {
      polls++;
      return poll(...args);
    };
    // A burst of stored-session CONNECTs: each asks for the tail at once.
    const first = here.sync();
    const burst = Array.from({ length: 50 }, () => here.sync());
    // Written while the first read runs: a caller after this must see it.
    there.open("late", STORE, "");
    await there.idle();
    const after = here.sync();
    assert.deepEqual(await Promise.all([first, ...burst, after]), Array(52).fill(true));
    assert.equal(here.size, 21, "every record read, the late one too");
    assert.ok(
      polls <= 6,
      `two reads of the tail (a few polls each), not one per caller: ${polls} polls`,
    );
  });
});

Deno.test("StoredSessions: the owner travels with the record to another gateway and a restart", async () => {
  await withBackend(async (b) => {
    const here = sessions(b);
    const there = sessions(b);
    await here.load();
    await there.load();
    there.open("dev-a", STORE, "alice");
    there.open("dev-anon", STORE, "");
    await there.idle();
    await here.sync();
    assert.equal(here.ownerOf("dev-a"), "alice");
    assert.equal(here.ownerOf("dev-anon"), "");
    assert.equal(here.ownerOf("nobody"), null);
    const restarted = sessions(b);
    await restarted.load();
    assert.equal(restarted.ownerOf("dev-a"), "alice");
  });
});

Deno.test("StoredSessions.ownerOf() is null once the session has expired offline", async () => {
  await withBackend(async (b) => {
    let now = 1_000_000;
    const a = sessions(b, { now: () => now, expiryS: 10 });
    await a.load();
    const s = a.open("dev", { ...STORE, expiryS: 10 }, "alice").session!;
    a.offline(s);
    assert.equal(a.ownerOf("dev"), "alice");
    now += 10_000;
    assert.equal(a.ownerOf("dev"), null, "an expired session belongs to nobody");
    await a.idle();
  });
});

Deno.test("StoredSessions reads the record topic without waiting at its end (a CONNECT waits on the read)", async () => {
  await withBackend(async (b) => {
    const signals: (AbortSignal | undefined)[] = [];
    const poll = b.poll.bind(b);
    // The embedded log takes no signal; the port's callers may pass one.
    b.poll = (address, from, count, ...signal: unknown[]) => {
      signals.push(signal[0] as AbortSignal | undefined);
      return poll(address, from, count);
    };
    const here = sessions(b);
    assert.equal(await here.load(), true);
    assert.equal(await here.sync(), true);
    assert.ok(signals.length >= 2);
    assert.ok(signals.every((s) => s === NO_WAIT), "every read asks for no wait");
  });
});

Deno.test("max_stored_sessions: a new session at the bound evicts the one offline the longest (warn with its id, counted); with every one connected it is full", async () => {
  await withBackend(async (b) => {
    let now = 1_000_000;
    const lines: string[] = [];
    let evicted = 0;
    const a = new StoredSessions(b, {
      stream: "mqtt_gateway",
      topic: "sessions",
      maxSessions: 3,
      maxExpiryS: 3600,
      expiryS: 3600,
      maxExpiryS5: 3600,
      sweepIntervalMs: 60_000,
      now: () => now,
      onEvicted: () => evicted++,
    }, new Logger("info", (l) => lines.push(l)));
    await a.load();
    const [x, y, z] = ["x", "y", "z"].map((id) => a.open(id, STORE, "").session!);
    for (const s of [y, x, z]) { // y went offline first, then x, then z
      now += 1000;
      a.offline(s);
    }
    assert.equal(a.full("new-1"), false, "offline sessions can make room");
    assert.equal(a.open("new-1", STORE, "").present, false);
    assert.equal(a.get("y"), undefined, "the longest offline is evicted");
    assert.equal(a.open("x", STORE, "").present, true, "x resumes: no new slot taken");
    a.open("new-2", STORE, ""); // z is the only one offline now
    assert.equal(a.get("z"), undefined);
    assert.deepEqual([a.size, evicted], [3, 2]);
    assert.equal(a.full("new-3"), true, "every stored session connected: refused");
    const warns = lines.map((l) => JSON.parse(l)).filter((l) =>
      l.msg === "Stored session evicted: max_stored_sessions reached"
    );
    assert.equal(warns[0].level, "warn");
    assert.equal(warns[0].client_id, "y");
    assert.equal(warns[0].offline_s, 2);
    await a.idle();

    // A restart with a lower bound keeps the sessions offline the shortest: new-2, recorded as
    // connected, is offline since the restart.
    a.offline(a.get("new-1")!);
    now += 1000;
    a.offline(a.get("x")!);
    await a.idle();
    now += 1000;
    const small = sessions(b, { maxSessions: 2, now: () => now });
    await small.load();
    assert.deepEqual([...["x", "new-1", "new-2"].map((id) => small.get(id) !== undefined)], [
      true,
      false,
      true,
    ]);
    await small.idle();
  });
});
