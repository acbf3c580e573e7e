import assert from "node:assert/strict";
import type { EmbeddedBackend } from "../log/embedded/mod.ts";
import { Logger } from "../observe/logger.ts";
import { openTestStore, sizedMessage } from "../../tests/helpers/embedded_store.ts";
import { sessionConsumer, type StoredSessionOptions, StoredSessions } from "./stored_sessions.ts";

const DAY_S = 86_400;
const STORE = { store: true, cleanStart: false, expiryS: DAY_S };
const RECORDS = { stream: "mqtt_gateway", topic: "sessions", partition: 0 };
const DATA = { stream: "s", topic: "t", partition: 0 };
const DATA_KEY = "s\u0000t\u00000";
const HOUR_MS = 3_600_000;

/** A settable wall clock: the store reads µs, the sessions ms. */
function manualClock(startMs = 1_700_000_000_000) {
  const clock = { ms: startMs, micros: () => clock.ms * 1000, now: () => clock.ms };
  return clock;
}

function sessions(
  b: EmbeddedBackend,
  now: () => number,
  o: Partial<StoredSessionOptions> & { lines?: string[] } = {},
): StoredSessions {
  const lines = o.lines ?? [];
  return new StoredSessions(b, {
    ...RECORDS,
    maxSessions: 10_000,
    maxExpiryS: DAY_S,
    expiryS: DAY_S,
    maxExpiryS5: DAY_S,
    sweepIntervalMs: 60_000,
    now,
    ...o,
  }, new Logger("info", (l) => lines.push(l)));
}

/** Client ids of the records in the record topic, oldest first. */
async function recordIds(b: EmbeddedBackend): Promise<string[]> {
  return (await b.poll(RECORDS, 0, 100_000)).map((m) => m.headers.get("mqtt.session")!);
}

Deno.test("compaction: live sessions' records are written again at the head and everything before goes, so the record topic no longer holds the shared segments that retention emptied", async () => {
  const clock = manualClock();
  // 1 MiB store: 128 KiB segments; ~60 KB data messages fill one in about two appends.
  await using store = await openTestStore({
    maxStoreBytes: 1024 * 1024,
    retentionMaxAgeSeconds: 60,
    clock: clock.micros,
  });
  const b = store.backend;
  const a = sessions(b, clock.now, { compactAfterMs: HOUR_MS });
  assert.equal(await a.load(), true);
  await b.createTopic(DATA.stream, DATA.topic, { partitions: 1 });
  // Sessions changing all the time: a session record beside every data message.
  for (let i = 0; i < 12; i++) {
    await b.append({ ...DATA, messages: [sizedMessage(60_000)] });
    a.offline(a.open(`dev-${i}`, STORE, "").session!);
    await a.idle();
  }
  const segments = () => [...Deno.readDirSync(`${store.path}-log`)].length;
  const before = segments();
  assert.ok(before >= 5, `${before} segments`);

  clock.ms += HOUR_MS; // the data is older than its 60 s; the records an hour old
  await b.append({ ...DATA, messages: [sizedMessage(120_000)] }); // a new active segment
  a.sweep(); // the compaction is due by age
  await a.compactor.idle();
  assert.equal(a.compactor.compactions, 1);
  await b.runRetention();
  assert.ok(segments() <= 2, `${segments()} segment files left of ${before}`);
  assert.deepEqual(
    (await recordIds(b)).sort(),
    [...Array(12).keys()].map((i) => `dev-${i}`).sort(),
  );

  // A restart reads every session from the restated records, offline since when it was.
  const again = sessions(b, clock.now);
  assert.equal(await again.load(), true);
  assert.equal(again.size, 12);
  assert.equal(again.get("dev-3")!.offlineSinceMs, a.get("dev-3")!.offlineSinceMs);
  assert.equal(again.open("dev-3", STORE, "").present, true);
  await again.stop();
  await a.stop();
});

Deno.test("compaction: an expired session leaves nothing once compacted (no record, no tombstone, no offset row); superseded records trigger it without waiting an hour", async () => {
  const clock = manualClock();
  await using store = await openTestStore({ clock: clock.micros });
  const b = store.backend;
  const lines: string[] = [];
  const a = sessions(b, clock.now, { expiryS: 60, lines });
  await a.load();
  await b.createTopic(DATA.stream, DATA.topic, { partitions: 1 });
  for (let i = 0; i < 600; i++) {
    const s = a.open(`gone-${i}`, STORE, "").session!;
    s.triples.add(DATA_KEY);
    await b.storeOffset(sessionConsumer(s.clientId), DATA, 0);
    a.offline(s);
  }
  a.offline(a.open("stays", { ...STORE, mqtt5: true }, "").session!);
  await a.idle();
  assert.equal((await recordIds(b)).length, 1202, "a record at CONNECT and one offline each");

  clock.ms += 61_000; // the 3.1.1 ones expire (60 s); the MQTT 5 one has a day
  assert.equal(a.sweep(), 600); // 600 tombstones: 1,802 records for one live session
  await a.compactor.idle();
  await a.idle();
  assert.equal(a.compactor.compactions, 1);
  assert.deepEqual(await recordIds(b), ["stays"], "only the live session's record is left");
  for (let i = 0; i < 600; i += 97) {
    assert.equal(await b.getOffset(sessionConsumer(`gone-${i}`), DATA), null);
  }
  assert.equal(a.forgetter.deleted, 600);
  const compacted = lines.map((l) => JSON.parse(l)).filter((l) =>
    l.msg === "Stored-session records compacted"
  );
  assert.deepEqual(compacted.map((l) => [l.sessions, l.dropped]), [[1, 1802]]);
  await a.stop();
});

Deno.test("compaction: a record topic created under a short expiry (retention 20 s) keeps an offline session whose expiry was raised to a day: its record is restated before the topic's own retention drops it", async () => {
  const clock = manualClock();
  await using store = await openTestStore({ clock: clock.micros });
  const b = store.backend;
  // As the previous version made it with session.expiry_s = 10: retention twice that.
  await b.createTopic(RECORDS.stream, RECORDS.topic, {
    partitions: 1,
    messageExpiryMicros: 20_000_000,
  });
  const lines: string[] = [];
  const a = sessions(b, clock.now, { lines });
  await a.load();
  a.offline(a.open("long", STORE, "").session!);
  await a.idle();
  for (let t = 0; t < 120; t += 5) { // two minutes: six times the topic's retention
    clock.ms += 5_000;
    a.sweep();
    await a.compactor.idle();
    await b.runRetention();
  }
  assert.ok(a.compactor.compactions >= 20, `${a.compactor.compactions} compactions\n${lines}`);
  const again = sessions(b, clock.now);
  await again.load();
  assert.equal(again.open("long", STORE, "").present, true, "the session outlived the retention");
  await again.stop();
  await a.stop();
});

Deno.test("a tombstone read at start whose positions were not deleted yet (the gateway stopped first) has them deleted", async () => {
  const clock = manualClock();
  await using store = await openTestStore({ clock: clock.micros });
  const b = store.backend;
  const a = sessions(b, clock.now);
  await a.load();
  await b.createTopic(DATA.stream, DATA.topic, { partitions: 1 });
  for (const id of ["left", "again"]) {
    const s = a.open(id, STORE, "").session!;
    s.triples.add(DATA_KEY);
    a.save(s);
    await b.storeOffset(sessionConsumer(id), DATA, 5);
  }
  await a.stop();
  // Tombstones written, their deletions never run; "again" is stored once more after its own.
  const record = (id: string, body: unknown) => ({
    payload: new TextEncoder().encode(JSON.stringify(body)),
    headers: new Map([["mqtt.session", id]]),
  });
  await b.append({
    ...RECORDS,
    messages: [
      record("left", { v: 1, deleted: true }),
      record("again", { v: 1, deleted: true }),
      record("again", { v: 1, s: [], t: [DATA_KEY], e: DAY_S, o: null, m: 4 }),
    ],
  });
  const later = sessions(b, clock.now);
  await later.load();
  await later.idle();
  assert.equal(await b.getOffset(sessionConsumer("left"), DATA), null, "deleted at start");
  assert.equal(await b.getOffset(sessionConsumer("again"), DATA), 5, "stored again: kept");
  await later.stop();
});

Deno.test("a log that is not compacted (Iggy: no truncate) whose record topic was made under a short expiry (retention 20 s): an offline session whose expiry was raised to a day has its record written again before the retention drops it", async () => {
  const clock = manualClock();
  await using store = await openTestStore({ clock: clock.micros });
  const b = store.backend;
  await b.createTopic(RECORDS.stream, RECORDS.topic, {
    partitions: 1,
    messageExpiryMicros: 20_000_000,
  });
  // The embedded log seen as a log that is not on this machine (no LocalLog, so no truncate):
  // what the sessions see of a log like Iggy's.
  const uncompacted = new Proxy(b, {
    get(t, k) {
      if (k === "kind") return "iggy";
      const v = Reflect.get(t, k, t);
      return k === "truncate" ? undefined : typeof v === "function" ? v.bind(t) : v;
    },
  }) as EmbeddedBackend;
  const a = sessions(uncompacted, clock.now);
  assert.equal(await a.load(), true);
  assert.equal(a.compactor.able, false);
  a.offline(a.open("long", STORE, "").session!);
  await a.idle();
  for (let t = 0; t < 120; t += 5) {
    clock.ms += 5_000;
    a.sweep();
    await a.sync(); // the renewal waits for a read of what other gateways wrote
    await a.idle();
    await b.runRetention();
  }
  assert.equal(a.compactor.compactions, 0);
  const again = sessions(uncompacted, clock.now);
  await again.load();
  assert.equal(again.open("long", STORE, "").present, true, "the session outlived the retention");
  assert.ok((await recordIds(b)).length <= 6, "superseded records still go by age");
  await again.stop();
  await a.stop();
});

Deno.test("compaction in forward mode drops only what the forwarder has forwarded: the rest stays until the next compaction after it is", async () => {
  const clock = manualClock();
  const forward = { consumer: "forwarder", whenFull: "refuse" as const };
  await using store = await openTestStore({ clock: clock.micros, forward });
  const b = store.backend;
  const a = sessions(b, clock.now);
  await a.load();
  for (let i = 0; i < 4; i++) { // a stored batch each: offsets 2i (CONNECT) and 2i + 1 (offline)
    a.offline(a.open(`dev-${i}`, STORE, "").session!);
    await a.idle();
  }
  await b.storeOffset("forwarder", RECORDS, 3); // offsets 0..3 forwarded, 4..7 not yet
  await a.compact();
  assert.equal((await b.poll(RECORDS, 0, 100))[0].offset, 4, "the unforwarded records stay");
  await b.storeOffset("forwarder", RECORDS, (await b.nextOffset(RECORDS)) - 1); // all forwarded
  await a.compact();
  assert.deepEqual((await recordIds(b)).sort(), ["dev-0", "dev-1", "dev-2", "dev-3"]);
  await a.stop();
});
