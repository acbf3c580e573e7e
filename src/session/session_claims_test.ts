import assert from "node:assert/strict";
import { EmbeddedBackend } from "../log/embedded/mod.ts";
import { Logger } from "../observe/logger.ts";
import { GatewayMetrics } from "../observe/gateway_metrics.ts";
import { H_CLAIM, parseClaim } from "../stored/claim_record.ts";
import type { Principal } from "../log/port.ts";
import { ClaimWatch, type LocalClaim } from "./session_claims.ts";
import { ConnectionRegistry, type Registered } from "./registry.ts";
import { StoredSessions } from "./stored_sessions.ts";
import { type WillContext, WillPublisher } from "./will.ts";

const STORE = { store: true, cleanStart: false, expiryS: 60 };
const CLEAN = { store: false, cleanStart: true, expiryS: 60 };

/** Two "gateways" on one log: their own sessions, registry, wills and claims; reads by hand. */
async function twoGateways(fn: (a: Side, b: Side) => Promise<void>, waitMs = 10_000) {
  const dir = await Deno.makeTempDir({ prefix: "session_claims_test_" });
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
  const sides = [side(backend, "gw-a", waitMs), side(backend, "gw-b", waitMs)];
  try {
    for (const s of sides) {
      assert.equal(await s.sessions.load(), true);
      s.claims.start();
    }
    await fn(sides[0], sides[1]);
  } finally {
    for (const s of sides) {
      s.claims.stop();
      await s.sessions.stop();
    }
    await backend.close();
    await Deno.remove(dir, { recursive: true });
  }
}

type Side = ReturnType<typeof side>;

function side(backend: EmbeddedBackend, gatewayId: string, waitMs: number) {
  const lines: Record<string, unknown>[] = [];
  const logger = new Logger("info", (l) => lines.push(JSON.parse(l)));
  const sessions = new StoredSessions(backend, {
    stream: "mqtt_gateway",
    topic: "sessions",
    maxSessions: 10,
    maxExpiryS: 60,
    expiryS: 60,
    maxExpiryS5: 60,
    sweepIntervalMs: 60_000,
  }, logger);
  const registry = new ConnectionRegistry(100);
  const wills = new WillPublisher();
  const metrics = new GatewayMetrics();
  let positionsStores = 0;
  const claims = new ClaimWatch({
    registry,
    sessions,
    wills,
    metrics,
    logger,
    positionsStored: () => Promise.resolve(void positionsStores++),
    gatewayId,
    pollIntervalMs: 3_600_000, // read by hand: `read()`
    waitMs,
  });
  return {
    sessions,
    registry,
    wills,
    metrics,
    claims,
    lines,
    read: () => sessions.sync(),
    get positionsStores() {
      return positionsStores;
    },
  };
}

interface FakeConnection extends Registered {
  claim: LocalClaim | null;
  session: object | null;
  ended: string[];
  willDiscarded: boolean;
}

function connection(ownerName: string, claim: LocalClaim | null): FakeConnection {
  const c: FakeConnection = {
    ownerName,
    claim,
    session: null,
    ended: [],
    willDiscarded: false,
    remoteAddress: "10.0.0.1:5000",
    close: (reason) => void c.ended.push(`close: ${reason}`),
    disconnect: (code, reason) => void c.ended.push(`0x${code.toString(16)}: ${reason}`),
    discardWill: () => void (c.willDiscarded = true),
  };
  return c;
}

const alice = { username: "alice" } as Principal;
const mallory = { username: "mallory" } as Principal;

/** A CONNECT accepted on `s`: claim written, then the id bound (as `claimClientId` does). */
async function connect(s: Side, id: string, who: Principal, req = CLEAN) {
  const claim = await s.claims.announce(id, who, req);
  const c = connection(who.username, claim);
  if (req.store) c.session = s.sessions.open(id, req, who.username).session;
  s.registry.takeOver(id, c);
  await s.sessions.records.written();
  return c;
}

Deno.test("ClaimWatch: a CONNECT through B closes A's connection of the id with 0x8E, once A reads the claim", async () => {
  await twoGateways(async (a, b) => {
    const onA = await connect(a, "dev", alice);
    await a.read(); // A's own claim read back: the connection here is the older from now on
    await connect(b, "dev", alice);
    assert.deepEqual(onA.ended, [], "not before A reads the claim");
    await a.read();
    assert.equal(onA.ended.length, 1);
    assert.match(onA.ended[0], /^0x8e: taken over by a new connection through gateway gw-b$/);
    assert.equal(a.registry.holder("dev"), undefined);
    assert.equal(a.metrics.takeovers.get(), 1);
    assert.ok(a.lines.some((l) => l.msg === "Session taken over through another gateway"));
  });
});

Deno.test("ClaimWatch: of two claims the later in the log wins, whichever gateway reads first", async () => {
  await twoGateways(async (a, b) => {
    const onA = await connect(a, "dev", alice); // claim 1
    const onB = await connect(b, "dev", alice); // claim 2
    // B reads first: A's claim comes before B's own, which B has not read back: B's is newer.
    await b.read();
    await a.read();
    assert.deepEqual(onB.ended, [], "the later claim's connection stays");
    assert.equal(onA.ended.length, 1, "the earlier one is taken over");
  });
});

Deno.test("ClaimWatch: a stored session connected elsewhere is resumed once its holder released it, without an offline record", async () => {
  await twoGateways(async (a, b) => {
    const onA = await connect(a, "dev", alice, STORE);
    await a.read();
    await b.read(); // B knows the session, connected (through A)
    assert.equal(b.sessions.get("dev")?.offlineSinceMs, null);
    let resumed = false;
    const announced = b.claims.announce("dev", alice, STORE).then((c) => (resumed = true, c));
    await b.sessions.records.written(); // the claim is in the log
    await a.read(); // A closes, stores the positions, releases
    assert.equal(onA.ended.length, 1);
    assert.equal(a.positionsStores, 1);
    // A's connection going offline writes nothing: the session is B's now.
    a.sessions.offline(onA.session as never);
    await a.sessions.records.written();
    assert.equal(resumed, false, "not before B reads the release");
    await b.read();
    await announced;
    assert.equal(b.sessions.get("dev")?.offlineSinceMs, null, "no offline record from A");
  });
});

Deno.test("ClaimWatch: with the holder gone, the resume waits takeover_wait_ms, then goes on (logged)", async () => {
  await twoGateways(async (a, b) => {
    await connect(a, "dev", alice, STORE); // A then "stops" answering: it never reads again
    await b.read();
    const t0 = performance.now();
    const claim = await b.claims.announce("dev", alice, STORE);
    const waited = performance.now() - t0;
    assert.ok(waited >= 190 && waited < 2000, `waited ${waited} ms`);
    assert.ok(claim.nonce.length > 0);
    const line = b.lines.find((l) =>
      l.msg === "Takeover: no release from the session's gateway in time"
    );
    assert.equal(line?.waited_ms, 200);
  }, 200);
});

Deno.test("ClaimWatch: a later claim read while a resume waits for its release takes that connection over as soon as it is made", async () => {
  await twoGateways(async (a, b) => {
    const onA1 = await connect(a, "dev", alice, STORE);
    await a.read();
    await b.read();
    const announced = b.claims.announce("dev", alice, STORE); // waits for A's release
    await b.sessions.records.written();
    await b.read(); // B's claim read back
    const onA2 = await connect(a, "dev", alice, STORE); // the device again, through A: later
    assert.equal(onA1.ended.length, 1, "taken over here");
    await a.read(); // B's claim is earlier than A's newest connection: nothing happens
    assert.deepEqual(onA2.ended, []);
    await b.read(); // A's later claim, while B still waits
    const claim = await announced; // A answered no release: the bound passes
    assert.ok(claim.supersededBy !== null);
    const onB = connection("alice", claim);
    b.registry.takeOver("dev", onB);
    b.claims.superseded("dev", onB, claim);
    assert.match(onB.ended[0] ?? "", /^0x8e: taken over by a new connection through gateway gw-a$/);
    assert.deepEqual(onA2.ended, [], "the latest stays");
  }, 300);
});

Deno.test("ClaimWatch: another principal's claim is refused: the owner's connection stays, the claimant's closes with 0x87 and no will", async () => {
  await twoGateways(async (a, b) => {
    const onA = await connect(a, "dev", alice);
    await a.read();
    const onB = await connect(b, "dev", mallory, STORE);
    await a.read(); // A refuses
    await a.sessions.records.written();
    assert.deepEqual(onA.ended, []);
    await b.read();
    assert.equal(onB.ended.length, 1);
    assert.match(onB.ended[0], /^0x87: client id "dev" belongs to another principal$/);
    assert.equal(onB.willDiscarded, true);
    assert.equal(b.sessions.get("dev"), undefined, "the session it made is removed");
    assert.equal(b.metrics.clientIdRefused.get({ reason: "owned_by_another" }), 1);
  });
});

Deno.test("ClaimWatch: a claim without Clean Start cancels a delayed will held for the id elsewhere; one with it sends it now", async () => {
  await twoGateways(async (a, b) => {
    const will = { topic: "t", payload: new Uint8Array(), qos: 0 as const, retain: false };
    a.wills.publish({} as WillContext, will, alice, "dev", 60_000);
    assert.equal(a.wills.delayed, 1);
    await connect(b, "dev", alice, STORE);
    await a.read();
    assert.equal(a.wills.delayed, 0, "cancelled: the device is back, through another gateway");
    const seen: [string, boolean][] = [];
    a.wills.reconnected = (id, cleanStart) => void seen.push([id, cleanStart]);
    await connect(b, "dev2", alice, CLEAN);
    await a.read();
    assert.deepEqual(seen, [["dev2", true]], "Clean Start ends the session: the will goes now");
  });
});

Deno.test("claims: a later shape is skipped; claims carry no session header, so the previous version passes over them", async () => {
  assert.deepEqual(parseClaim('{"v":2,"claim":"n","u":""}'), { kind: "unknown" });
  assert.deepEqual(parseClaim("not json"), { kind: "unknown" });
  assert.deepEqual(parseClaim('{"v":1,"what":"else","u":""}'), { kind: "unknown" });
  assert.equal(parseClaim('{"v":1,"claim":"n","u":"a","c":true,"g":"x"}').kind, "claim");
  await twoGateways(async (a, b) => {
    const m = a.sessions.records.message("dev", { v: 1, claim: "n", u: "" }, H_CLAIM);
    assert.equal(m.headers.has("mqtt.session"), false);
    await a.sessions.records.write("dev", { v: 9, future: true }, H_CLAIM);
    await connect(a, "dev", alice);
    await b.read();
    assert.equal(b.sessions.records.malformed, 0, "claims are not session records");
    assert.equal(b.sessions.get("dev"), undefined);
  });
});
