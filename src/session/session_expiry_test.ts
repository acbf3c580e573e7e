import assert from "node:assert/strict";
import { EmbeddedBackend } from "../log/embedded/mod.ts";
import { Logger } from "../observe/logger.ts";
import { sessionConsumer, type StoredSessionOptions, StoredSessions } from "./stored_sessions.ts";
import { expiryOf, PositionForgetter } from "./session_expiry.ts";
import { WallClock } from "../base/wall_clock.ts";

const DAY_S = 86_400;
const STORE_311 = { store: true, cleanStart: false, expiryS: DAY_S };
const TOPIC = { stream: "sensors", topic: "t", partition: 0 };
const TRIPLE_KEY = `${TOPIC.stream}\u0000${TOPIC.topic}\u00000`;

async function withBackend(fn: (b: EmbeddedBackend, dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "session_expiry_test_" });
  const backend = new EmbeddedBackend({
    path: `${dir}/store.db`,
    users: [],
    maxStoreBytes: 256 << 20,
    retentionMaxAgeSeconds: 0,
    retentionMaxTopicBytes: 0,
    retentionIntervalMs: 3_600_000,
    maxAppendBatch: 1000,
    writerThread: "in-process",
  });
  await backend.open();
  try {
    await fn(backend, dir);
  } finally {
    await backend.close();
    await Deno.remove(dir, { recursive: true });
  }
}

function sessions(
  b: EmbeddedBackend,
  o: Partial<StoredSessionOptions> & { lines?: string[] } = {},
): StoredSessions {
  const lines = o.lines ?? [];
  return new StoredSessions(b, {
    stream: "mqtt_gateway",
    topic: "sessions",
    maxSessions: 10_000,
    maxExpiryS: DAY_S,
    expiryS: DAY_S,
    maxExpiryS5: DAY_S,
    sweepIntervalMs: 60_000,
    ...o,
  }, new Logger("info", (l) => lines.push(l)));
}

/** The catalog's consumer-offset rows of stored sessions (what an expired one must not leave). */
async function sessionRows(dir: string): Promise<number> {
  const { DatabaseSync } = await import("node:sqlite");
  const db = new DatabaseSync(`${dir}/store.db`, { readOnly: true });
  try {
    const row = db.prepare(
      "SELECT count(*) AS n FROM consumer_offsets WHERE consumer LIKE 'mqtt-session-%'",
    ).get() as { n: number };
    return row.n;
  } finally {
    db.close();
  }
}

/** Segment files of the message log (`<path>-log`). */
async function segmentFiles(dir: string): Promise<number> {
  let n = 0;
  for await (const _ of Deno.readDir(`${dir}/store.db-log`)) n++;
  return n;
}

Deno.test("expiryOf(): MQTT 3.1.1 follows session.expiry_s now; MQTT 5 keeps its own, capped now", () => {
  const rules = { expiryS: 60, maxExpiryS5: 100 };
  assert.equal(expiryOf({ expiryS: DAY_S }, rules), 60, "3.1.1 stored under a day: 60 now");
  assert.equal(expiryOf({ expiryS: 10 }, rules), 60, "3.1.1: the setting, also when raised");
  assert.equal(expiryOf({ expiryS: DAY_S, mqtt5: true }, rules), 100, "5: the cap now");
  assert.equal(expiryOf({ expiryS: 30, mqtt5: true }, rules), 30, "5: its own when shorter");
  assert.equal(expiryOf({ expiryS: 30, mqtt5: true }, { ...rules, maxExpiryS5: 0 }), 0);
});

Deno.test("StoredSessions: 2,000 sessions stored under expiry_s 86,400 all expire at the first sweep after a restart with 60 (one line, counted); their positions leave the catalog; a returning id is not present", async () => {
  await withBackend(async (b, dir) => {
    const N = 2_000;
    let now = 1_700_000_000_000;
    const before = sessions(b, { now: () => now });
    assert.equal(await before.load(), true);
    await b.createTopic(TOPIC.stream, TOPIC.topic, { partitions: 1 });
    await b.append({
      ...TOPIC,
      messages: [{ payload: new TextEncoder().encode("x".repeat(1024)), headers: new Map() }],
    });
    for (let i = 0; i < N; i++) {
      const s = before.open(`a-${i}`, STORE_311, "").session!;
      s.subscriptions.set("sensors/#", 1);
      s.triples.add(TRIPLE_KEY);
      await b.storeOffset(sessionConsumer(s.clientId), TOPIC, 0); // one position each
      now += 10; // they go offline over 20 s
      before.offline(s);
    }
    await before.idle();
    assert.equal(await sessionRows(dir), N);
    const segmentsBefore = await segmentFiles(dir);

    // Restart with 60: every session has been offline for more than 60 s under the new setting.
    now += 61_000;
    const lines: string[] = [];
    const counted: number[] = [];
    const after = sessions(b, {
      now: () => now,
      expiryS: 60,
      maxExpiryS: 60,
      lines,
      onExpired: (n) => counted.push(n),
    });
    assert.equal(await after.load(), true); // load() sweeps once
    assert.equal(after.size, 0);
    assert.deepEqual(counted, [N]);
    const expiredLines = lines.filter((l) => l.includes("Stored sessions expired"));
    assert.equal(expiredLines.length, 1, lines.join("\n"));
    assert.equal(JSON.parse(expiredLines[0]).count, N);
    await after.idle();
    assert.equal(await sessionRows(dir), 0, "no consumer-offset row is left behind");
    assert.equal(after.forgetter.deleted, N);
    // A tombstone is a small record in the shared log, not a segment of its own (at most one
    // more is filled, and the one after it may be prepared ahead).
    assert.ok(
      await segmentFiles(dir) <= segmentsBefore + 2,
      `${N} tombstones: ${segmentsBefore} → ${await segmentFiles(dir)} segment files`,
    );
    assert.equal(after.open("a-5", STORE_311, "").present, false, "a returning id: present 0");

    // A third instance reads the tombstones: nothing comes back.
    await after.idle();
    const third = sessions(b, { now: () => now, expiryS: 60, maxExpiryS: 60 });
    assert.equal(await third.load(), true);
    assert.ok(third.get("a-5") !== undefined, "the new a-5 only");
    assert.equal(third.size, 1);
  });
});

Deno.test("StoredSessions: a session offline less than the new expiry at the restart expires at a later sweep, not before", async () => {
  await withBackend(async (b) => {
    let now = 1_700_000_000_000;
    const before = sessions(b, { now: () => now });
    await before.load();
    before.offline(before.open("late", STORE_311, "").session!);
    await before.idle();
    now += 30_000;
    const after = sessions(b, { now: () => now, expiryS: 60, maxExpiryS: 60 });
    await after.load();
    assert.ok(after.get("late") !== undefined, "30 s of 60: kept");
    now += 29_999;
    assert.equal(after.sweep(), 0);
    now += 1;
    assert.equal(after.sweep(), 1);
    await after.idle();
  });
});

Deno.test("StoredSessions: an MQTT 5 session keeps its own interval under a larger cap, and the cap now when it is lowered", async () => {
  await withBackend(async (b) => {
    let now = 1_700_000_000_000;
    const before = sessions(b, { now: () => now });
    await before.load();
    const v5 = { store: true, cleanStart: false, mqtt5: true };
    before.offline(before.open("own-30", { ...v5, expiryS: 30 }, "").session!);
    before.offline(before.open("day", { ...v5, expiryS: DAY_S }, "").session!);
    await before.idle();
    const after = sessions(b, { now: () => now, expiryS: 10, maxExpiryS5: 45 });
    await after.load();
    assert.equal(after.expiryOf(after.get("own-30")!), 30, "not the 3.1.1 setting (10)");
    assert.equal(after.expiryOf(after.get("day")!), 45, "capped by max_expiry_s now");
    now += 30_000;
    assert.equal(after.sweep(), 1);
    assert.equal(after.get("own-30"), undefined);
    now += 15_000;
    assert.equal(after.sweep(), 1);
    assert.equal(after.size, 0);
    await after.idle();
  });
});

Deno.test("StoredSessions: records of the previous version (no protocol field) load; with MQTT 5 options they are MQTT 5, without them 3.1.1", async () => {
  await withBackend(async (b) => {
    const now = 1_700_000_000_000;
    const first = sessions(b, { now: () => now });
    await first.load();
    const old = (id: string, record: unknown) => ({
      payload: new TextEncoder().encode(JSON.stringify(record)),
      headers: new Map([["mqtt.session", id]]),
    });
    const offline = now - 120_000; // two minutes ago
    await b.append({
      stream: "mqtt_gateway",
      topic: "sessions",
      partition: 0,
      messages: [
        old("old-311", { v: 1, s: [["a/b", 1]], t: [], e: DAY_S, o: offline, u: "" }),
        old("old-5", { v: 1, s: [["a/b", 1]], p: [["a/b", 0, 0, 0, 7]], e: DAY_S, o: offline }),
      ],
    });
    const after = sessions(b, { now: () => now, expiryS: 60, maxExpiryS5: DAY_S });
    assert.equal(await after.load(), true);
    assert.equal(after.get("old-311"), undefined, "3.1.1: 60 s now, offline 120 s: expired");
    const v5 = after.get("old-5")!;
    assert.equal(v5.mqtt5, true);
    assert.equal(v5.options?.get("a/b")?.subscriptionId, 7);
    await after.idle();
  });
});

Deno.test("StoredSessions: a clean start keeps the positions of the session it discards only until they are deleted; an id that gets a stored session again first keeps its rows", async () => {
  await withBackend(async (b, dir) => {
    const a = sessions(b);
    await a.load();
    await b.createTopic(TOPIC.stream, TOPIC.topic, { partitions: 1 });
    for (const id of ["gone", "back"]) {
      const s = a.open(id, STORE_311, "").session!;
      s.triples.add(TRIPLE_KEY);
      await b.storeOffset(sessionConsumer(id), TOPIC, 0);
    }
    a.open("gone", { store: false, cleanStart: true, expiryS: 0 }, ""); // 3.1.1 clean session 1
    a.remove("back");
    a.open("back", STORE_311, ""); // back before the tombstone is stored: keeps its rows
    await a.idle();
    assert.equal(await b.getOffset(sessionConsumer("gone"), TOPIC), null);
    assert.equal(await b.getOffset(sessionConsumer("back"), TOPIC), 0);
    assert.equal(await sessionRows(dir), 1);
  });
});

Deno.test("PositionForgetter.stop(): the deletions still queued are dropped; those under way are waited for", async () => {
  let calls = 0;
  let release = () => {};
  const answered = new Promise<void>((r) => release = r); // the log answers when we say
  const backend = {
    deleteOffset: () => (calls++, answered),
  } as unknown as EmbeddedBackend;
  const forgetter = new PositionForgetter(backend, new Logger("error", () => {}));
  for (let i = 0; i < 100; i++) forgetter.forget(`id-${i}`, `c-${i}`, [TRIPLE_KEY]);
  await Promise.resolve();
  const inFlight = calls;
  assert.ok(inFlight > 0 && inFlight < 100, `one batch under way: ${inFlight}`);
  const stopped = forgetter.stop();
  forgetter.forget("late", "c-late", [TRIPLE_KEY]); // nothing is queued after stop()
  release();
  await stopped;
  assert.equal(calls, inFlight, "no queued deletion was sent after stop()");
  assert.equal(forgetter.deleted, inFlight);
});

Deno.test("StoredSessions: a forward step of the wall clock does not age an offline session; real time does", async () => {
  await withBackend(async (b) => {
    let wall = 1_780_000_000_000 - 20 * DAY_S * 1000; // 20 days behind
    let mono = 0;
    const clock = new WallClock({ wall: () => wall, mono: () => mono });
    const s = sessions(b, { clock, expiryS: 60 });
    await s.load();
    const { session } = s.open("dev", STORE_311, "");
    s.offline(session!);
    wall += 20 * DAY_S * 1000; // NTP answers
    wall += 30_000;
    mono += 30_000;
    assert.equal(s.sweep(), 0, "30 s offline, not 20 days");
    assert.equal(s.open("dev", { ...STORE_311, store: true }, "").present, true);
    s.offline(s.get("dev")!);
    wall += 61_000;
    mono += 61_000;
    assert.equal(s.sweep(), 1, "61 s of real time: expired");
    await s.stop();
  });
});
