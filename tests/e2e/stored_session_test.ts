/**
 * Stored sessions end to end (issue 18, DESIGN §4 "Stored sessions"): a clean-session-0 client's
 * subscriptions and positions are kept in the log, so after a disconnect and a gateway restart it
 * gets CONNACK session present 1 and everything published meanwhile, QoS 1 at least once.
 */
import assert from "node:assert/strict";
import {
  connectPacket,
  HAS_MOSQUITTO_CLIENTS,
  RawClient,
  run,
  startGateway,
  type TestGateway,
  waitFor,
} from "../helpers/gateway.ts";
import { opts, publishAll, publishesBefore, receive, subscribe } from "./_subscribe_helpers.ts";
import { connectRaw } from "../helpers/gateway.ts";

const ROOM42 = "building/north/room/42/temp";

/** Connects with clean session 0; returns the client and the CONNACK's two body bytes. */
async function connectStored(port: number, id: string, clean = false) {
  const c = await RawClient.connect(port);
  await c.send(connectPacket(id, { clean }));
  const ack = await c.readPacket();
  assert.ok(ack !== null && ack[0] === 0x20, "CONNACK");
  return { c, present: ack[2], code: ack[3] };
}

/** Two gateways in turn on one store directory. */
async function withStore(
  env: Record<string, string>,
  fn: (start: () => Promise<TestGateway>) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "iggy-mqtt-stored-" });
  try {
    await fn(() => startGateway({ env: { IGGY_MQTT_EMBEDDED_PATH: `${dir}/gateway.db`, ...env } }));
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

Deno.test({
  name: "acceptance: a clean-session-off mosquitto_sub that misses 50 QoS 1 messages and comes " +
    "back after a gateway restart receives all 50",
  ignore: !HAS_MOSQUITTO_CLIENTS,
  ...opts,
  async fn() {
    await withStore({}, async (start) => {
      const gw1 = await start();
      try {
        const args = ["-h", "127.0.0.1", "-p", String(gw1.port), "-c", "-i", "dev-1", "-q", "1"];
        const first = run("mosquitto_sub", [...args, "-t", ROOM42, "-C", "1", "-W", "10"]);
        await waitFor(
          () => gw1.view.subscriptions(ROOM42) !== undefined,
          5000,
          "SUB",
        );
        const pub = await connectRaw(gw1.port, "pub");
        await publishAll(pub, [[ROOM42, "hello"]]);
        const r = await first;
        assert.equal(r.code, 0, r.stderr);
        assert.equal(r.stdout, "hello\n");
        await waitFor(() => gw1.view.storedSession("dev-1")?.offlineSinceMs != null, 5000, "off");
        const missed: [string, string][] = Array.from({ length: 50 }, (_, i) => [ROOM42, `m${i}`]);
        await publishAll(pub, missed, 10);
        pub.close();
      } finally {
        await gw1.stop();
      }
      const gw2 = await start();
      try {
        const args = ["-h", "127.0.0.1", "-p", String(gw2.port), "-c", "-i", "dev-1", "-q", "1"];
        const r = await run("mosquitto_sub", [...args, "-t", ROOM42, "-C", "50", "-W", "20"]);
        assert.equal(r.code, 0, r.stderr);
        assert.deepEqual(
          r.stdout.trim().split("\n"),
          Array.from({ length: 50 }, (_, i) => `m${i}`),
        );
      } finally {
        await gw2.stop();
      }
    });
  },
});

Deno.test({
  name: "a resumed session gets CONNACK session present 1 and its backlog without subscribing " +
    "again; wildcard filters are kept too; unacknowledged copies come again (at least once)",
  ...opts,
  async fn() {
    await withStore({}, async (start) => {
      const gw1 = await start();
      try {
        const pub = await connectRaw(gw1.port, "pub");
        await publishAll(pub, [["building/south/room/1/t", "create"]]); // the target exists
        const first = await connectStored(gw1.port, "dev-2");
        assert.deepEqual([first.present, first.code], [0, 0], "a new session: present 0");
        assert.deepEqual(await subscribe(first.c, [[ROOM42, 1], ["building/+/room/#", 1]]), [1, 1]);
        await publishAll(pub, [[ROOM42, "live"], ["building/south/room/1/t", "wild"]], 5);
        // Received but not acknowledged: must come again after the resume.
        const live = await receive(first.c, 2, { ack: false });
        assert.deepEqual(live.map((m) => m.payload), ["live", "wild"]);
        first.c.close();
        await waitFor(() => gw1.view.storedSession("dev-2")?.offlineSinceMs != null, 5000, "off");
        await publishAll(pub, [[ROOM42, "away-1"], ["building/south/room/1/t", "away-2"]], 9);
        pub.close();
      } finally {
        await gw1.stop();
      }
      const gw2 = await start();
      try {
        const again = await connectStored(gw2.port, "dev-2");
        assert.deepEqual([again.present, again.code], [1, 0], "session present 1");
        const got = await receive(again.c, 4);
        // One copy each although ROOM42 matches both filters; per partition in order.
        assert.deepEqual(got.map((m) => m.payload).sort(), ["away-1", "away-2", "live", "wild"]);
        assert.deepEqual(await publishesBefore(again.c), []);
        // Live again after the catch-up, still one copy.
        const pub = await connectRaw(gw2.port, "pub2");
        await publishAll(pub, [[ROOM42, "now"]]);
        assert.deepEqual((await receive(again.c, 1)).map((m) => m.payload), ["now"]);
        assert.deepEqual(await publishesBefore(again.c), []);
        again.c.close();
        pub.close();
      } finally {
        await gw2.stop();
      }
    });
  },
});

Deno.test({
  name: "clean session 1 discards a stored session [MQTT-3.1.2-6]: present 0, no backlog",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const first = await connectStored(gw.port, "dev-3");
      assert.deepEqual(await subscribe(first.c, [[ROOM42, 1]]), [1]);
      first.c.close();
      await waitFor(() => gw.view.storedSession("dev-3")?.offlineSinceMs != null, 5000, "off");
      const pub = await connectRaw(gw.port, "pub");
      await publishAll(pub, [[ROOM42, "missed"]]);
      const clean = await connectStored(gw.port, "dev-3", true);
      assert.deepEqual([clean.present, clean.code], [0, 0]);
      assert.equal(gw.view.storedSession("dev-3"), undefined);
      assert.deepEqual(await publishesBefore(clean.c), []);
      clean.c.close();
      // And back to clean session 0: a new, empty session.
      const fresh = await connectStored(gw.port, "dev-3");
      assert.deepEqual([fresh.present, fresh.code], [0, 0]);
      assert.deepEqual(await publishesBefore(fresh.c), []);
      fresh.c.close();
      pub.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "limits.max_stored_sessions: with every stored session connected a new one gets " +
    "CONNACK 3 (logged); a known one and clean sessions still connect",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_LIMITS_MAX_STORED_SESSIONS: "1" } });
    try {
      const a = await connectStored(gw.port, "keep-a");
      assert.equal(a.code, 0);
      const b = await connectStored(gw.port, "keep-b");
      assert.equal(b.code, 3, "server unavailable");
      assert.ok(await b.c.closedByPeer(3000), "closed after CONNACK 3");
      const refused = gw.logs.map((l) => JSON.parse(l)).filter((l) =>
        l.msg === "Connection refused" && l.reason === "max_stored_sessions reached"
      );
      assert.equal(refused.length, 1, "the refusal is logged once, with its reason");
      assert.equal(refused[0].level, "warn");
      a.c.close();
      await waitFor(() => gw.view.storedSession("keep-a")?.offlineSinceMs != null, 5000, "off");
      const again = await connectStored(gw.port, "keep-a");
      assert.deepEqual([again.present, again.code], [1, 0]);
      const clean = await connectStored(gw.port, "clean-c", true);
      assert.equal(clean.code, 0);
      assert.equal(gw.view.metrics.storedSessionsRefused.get(), 1);
      again.c.close();
      clean.c.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "limits.max_stored_sessions: at the bound a new stored session evicts the one offline " +
    "the longest (one warn naming it, counted in /metrics); the others resume",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_LIMITS_MAX_STORED_SESSIONS: "2" } });
    const offline = (id: string) => gw.view.storedSession(id)?.offlineSinceMs != null;
    try {
      for (const id of ["old-a", "old-b"]) { // old-a goes offline first
        const c = await connectStored(gw.port, id);
        assert.equal(c.code, 0);
        c.c.close();
        await waitFor(() => offline(id), 5000, `${id} offline`);
      }
      const fresh = await connectStored(gw.port, "new-c");
      assert.deepEqual([fresh.present, fresh.code], [0, 0], "room made, not refused");
      const b = await connectStored(gw.port, "old-b");
      assert.deepEqual([b.present, b.code], [1, 0], "old-b kept its session");
      const evicted = gw.logs.map((l) => JSON.parse(l)).filter((l) =>
        l.msg === "Stored session evicted: max_stored_sessions reached"
      );
      assert.equal(evicted.length, 1, "one warn line");
      assert.deepEqual([evicted[0].level, evicted[0].client_id], ["warn", "old-a"]);
      const metrics = await (await fetch(`http://127.0.0.1:${gw.httpPort}/metrics`)).text();
      assert.match(metrics, /^session_stored_evicted_total 1$/m);
      assert.equal(gw.view.metrics.storedSessionsRefused.get(), 0);
      // Both stored sessions connected: nothing to evict, a new one is refused (CONNACK 3).
      const refused = await connectStored(gw.port, "new-d");
      assert.equal(refused.code, 3);
      for (const c of [fresh.c, b.c, refused.c]) c.close();
      await waitFor(() => offline("new-c") && offline("old-b"), 5000, "both offline");
      const a = await connectStored(gw.port, "old-a");
      assert.deepEqual([a.present, a.code], [0, 0], "old-a was evicted: a new session");
      a.c.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "session.expiry_s: a session offline longer than its expiry is removed; the client then " +
    "starts a new one (present 0)",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_SESSION_EXPIRY_S: "1" } });
    try {
      const first = await connectStored(gw.port, "dev-4");
      assert.deepEqual(await subscribe(first.c, [[ROOM42, 1]]), [1]);
      first.c.close();
      await waitFor(() => gw.view.storedSession("dev-4") === undefined, 5000, "expired");
      const again = await connectStored(gw.port, "dev-4");
      assert.deepEqual([again.present, again.code], [0, 0]);
      again.c.close();
    } finally {
      await gw.stop();
    }
  },
});
