/**
 * Takeover across gateways [MQTT-3.1.4-2]: one client id connected through gateway A, then
 * through gateway B on the same Iggy. A's connection is closed (MQTT 5: DISCONNECT 0x8E Session
 * taken over) within the claim bound, the session's messages reach only B's connection from then
 * on, and none is lost. Two in-process gateways and MQTT.js clients (3.1.1 and 5) on real
 * sockets: over the fake Iggy always (CI), and over a real Iggy server when `IGGY_TEST_ADDRESS` is
 * set (`IGGY_TEST_USERNAME` / `IGGY_TEST_PASSWORD`, default iggy/iggy; skipped loudly otherwise).
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";
import {
  HAS_MOSQUITTO_CLIENTS,
  startGateway,
  type TestGateway,
  waitFor,
} from "../helpers/gateway.ts";

const ADDRESS = Deno.env.get("IGGY_TEST_ADDRESS") ?? "";
const USER = Deno.env.get("IGGY_TEST_USERNAME") || "iggy";
const PASS = Deno.env.get("IGGY_TEST_PASSWORD") || "iggy";
if (ADDRESS === "") {
  console.warn(
    "WARNING: IGGY_TEST_ADDRESS is not set; the takeover test on a real Iggy is SKIPPED.",
  );
}
if (!HAS_MOSQUITTO_CLIENTS) {
  console.warn("WARNING: mosquitto_sub is not installed; the takeover test with it is SKIPPED.");
}
/** `session.claim_poll_interval_ms` in these tests: the bound a takeover is held to. */
const POLL_MS = 100;
/** A's close may come one read of the record topic and one DISCONNECT write after the bound. */
const SLACK_MS = 400;

// deno-lint-ignore no-explicit-any
type Packet = any;

interface Target {
  readonly name: string;
  readonly ignore: boolean;
  open(): Promise<{ address: string; close(): Promise<void> }>;
}

const TARGETS: Target[] = [
  {
    name: "fake Iggy",
    ignore: false,
    open() {
      const node = new FakeNode({ dialect: "0.11", store: new FakeStore() });
      return Promise.resolve({ address: node.listen(), close: () => node.close() });
    },
  },
  {
    name: "real Iggy",
    ignore: ADDRESS === "",
    open: () => Promise.resolve({ address: ADDRESS, close: () => Promise.resolve() }),
  },
];

function mapOf(suffix: string): string {
  return `
default_stream = "takeover_default_${suffix}"
default_topic = "messages_default"
[[rule]]
mqtt_topic = 'sensors/([^/]+)/data'
stream = 'takeover_${suffix}'
topic = 'sensor_data'
partition_key = 'sensor_$1'
`;
}

function gatewayOn(
  address: string,
  id: string,
  suffix: string,
  env: Record<string, string> = {},
): Promise<TestGateway> {
  return startGateway({
    env: {
      IGGY_MQTT_GATEWAY_BACKEND: "iggy",
      IGGY_MQTT_GATEWAY_ID: id,
      IGGY_MQTT_IGGY_ADDRESS: address,
      IGGY_MQTT_IGGY_USERNAME: USER,
      IGGY_MQTT_IGGY_PASSWORD: PASS,
      IGGY_MQTT_IGGY_RECONNECT_MAX_MS: "500",
      IGGY_MQTT_IGGY_REQUEST_TIMEOUT_MS: "3000",
      IGGY_MQTT_SESSION_STORE_STREAM: `takeover_sessions_${suffix}`,
      IGGY_MQTT_RETAINED_STREAM: `takeover_retained_${suffix}`,
      IGGY_MQTT_SESSION_CLAIM_POLL_INTERVAL_MS: String(POLL_MS),
      IGGY_MQTT_LIMITS_COMMIT_INTERVAL_MS: "60000", // positions come from the takeover's store
      ...env,
    },
    map: mapOf(suffix),
  });
}

/** A client recording its messages, its close and the server's DISCONNECT from the start. */
async function client(gw: TestGateway, clientId: string, version: 4 | 5, clean: boolean) {
  const c = mqtt.connect(`mqtt://127.0.0.1:${gw.port}`, {
    protocolVersion: version,
    clientId,
    clean,
    reconnectPeriod: 0,
    ...(version === 5 ? { properties: { sessionExpiryInterval: clean ? 0 : 3600 } } : {}),
  });
  const got: string[] = [];
  // closedAt: the server's DISCONNECT (MQTT 5: it has closed its side then; the socket lingers
  // until the client closes it) or the socket's close, whichever comes first.
  const seen = { closedAt: 0, disconnect: null as number | null };
  c.on("message", (_t, payload) => got.push(payload.toString()));
  c.on("disconnect", (p: Packet) => {
    seen.disconnect = p.reasonCode ?? 0;
    seen.closedAt ||= performance.now();
  });
  c.on("close", () => seen.closedAt ||= performance.now());
  const connack: Packet = await new Promise((resolve, reject) => {
    c.once("connect", resolve);
    c.once("error", reject);
  });
  return { c, got, seen, connack };
}

for (const target of TARGETS) {
  for (const version of [5, 4] as const) {
    Deno.test({
      name: `takeover across gateways (${target.name}, MQTT ${
        version === 5 ? "5" : "3.1.1"
      }): A's connection closes within the bound, the stored session's messages reach only B, none lost`,
      ignore: target.ignore,
      async fn() {
        const iggy = await target.open();
        const suffix = crypto.randomUUID().slice(0, 8);
        const a = await gatewayOn(iggy.address, `gw-a-${suffix}`, suffix);
        const b = await gatewayOn(iggy.address, `gw-b-${suffix}`, suffix);
        const topic = "sensors/t1/data";
        try {
          const pub = await client(b, `pub-${suffix}`, 5, true);
          await pub.c.publishAsync(topic, "create", { qos: 1 }); // the target exists
          const id = `dev-${suffix}`;
          const onA = await client(a, id, version, false);
          await onA.c.subscribeAsync(topic, { qos: 1 });
          for (let i = 0; i < 5; i++) await pub.c.publishAsync(topic, `before-${i}`, { qos: 1 });
          await waitFor(() => onA.got.length === 5, 10_000, "A gets the first five");

          const connectedAt = performance.now();
          const onB = await client(b, id, version, false);
          assert.equal(onB.connack.sessionPresent, true, "B resumes the stored session");
          await waitFor(() => onA.seen.closedAt > 0, 5000, "A's connection closed");
          const tookMs = onA.seen.closedAt - connectedAt;
          assert.ok(tookMs < POLL_MS + SLACK_MS, `closed after ${tookMs.toFixed(0)} ms`);
          if (version === 5) assert.equal(onA.seen.disconnect, 0x8e, "Session taken over");
          const aGot = onA.got.length;

          for (let i = 0; i < 10; i++) await pub.c.publishAsync(topic, `after-${i}`, { qos: 1 });
          const after = Array.from({ length: 10 }, (_, i) => `after-${i}`);
          await waitFor(() => after.every((m) => onB.got.includes(m)), 10_000, "B gets them all");
          assert.equal(onA.got.length, aGot, "nothing more reaches A's closed connection");
          // At least once: what A had not acknowledged may come again; nothing is missing.
          assert.deepEqual(onB.got.filter((m) => m.startsWith("after-")), after, "in order, once");
          assert.ok(
            a.logs.some((l) => l.includes("Session taken over through another gateway")),
            "A says so",
          );
          assert.equal(a.view.connected, 0, "A holds no connection of the id");
          await onB.c.endAsync();
          await pub.c.endAsync();
        } finally {
          await a.stop();
          await b.stop();
          await iggy.close();
        }
      },
    });
  }

  Deno.test({
    name:
      `takeover across gateways (${target.name}): a clean-session 3.1.1 client and an MQTT 5 one without a stored session are taken over too`,
    ignore: target.ignore,
    async fn() {
      const iggy = await target.open();
      const suffix = crypto.randomUUID().slice(0, 8);
      const a = await gatewayOn(iggy.address, `gw-a-${suffix}`, suffix);
      const b = await gatewayOn(iggy.address, `gw-b-${suffix}`, suffix);
      try {
        for (const version of [4, 5] as const) {
          const id = `clean-${version}-${suffix}`;
          const onA = await client(a, id, version, true);
          const connectedAt = performance.now();
          const onB = await client(b, id, version, true);
          assert.equal(onB.connack.sessionPresent, false);
          await waitFor(() => onA.seen.closedAt > 0, 5000, "A's connection closed");
          const tookMs = onA.seen.closedAt - connectedAt;
          assert.ok(tookMs < POLL_MS + SLACK_MS, `closed after ${tookMs.toFixed(0)} ms`);
          if (version === 5) assert.equal(onA.seen.disconnect, 0x8e);
          // B's connection is the newer: A's claim, read by B, does not close it. Barrier: a
          // marker id through B then A is closed on B once B has read past both claims.
          const marker = await client(b, `marker-${id}`, 5, true);
          const markerOnA = await client(a, `marker-${id}`, 5, true);
          await waitFor(() => marker.seen.closedAt > 0, 5000, "B read past A's claims");
          assert.equal(onB.seen.closedAt, 0, "B's connection stays");
          await markerOnA.c.endAsync();
          await onB.c.endAsync();
        }
      } finally {
        await a.stop();
        await b.stop();
        await iggy.close();
      }
    },
  });
}

for (const target of TARGETS) {
  Deno.test({
    name:
      `takeover across gateways (${target.name}, mosquitto_sub): MQTT 5 gets DISCONNECT 0x8E and exits; 3.1.1 is closed, reconnects through A and takes the id back from B`,
    ignore: target.ignore || !HAS_MOSQUITTO_CLIENTS,
    async fn() {
      const iggy = await target.open();
      const suffix = crypto.randomUUID().slice(0, 8);
      const a = await gatewayOn(iggy.address, `gw-a-${suffix}`, suffix);
      const b = await gatewayOn(iggy.address, `gw-b-${suffix}`, suffix);
      try {
        for (const version of ["mqttv5", "mqttv311"] as const) {
          const id = `mosq-${version}-${suffix}`;
          const expiry = version === "mqttv5" ? ["-x", "3600"] : [];
          const sub = new Deno.Command("mosquitto_sub", {
            args: ["-h", "127.0.0.1", "-p", String(a.port), "-V", version, "-i", id, "-c"]
              .concat(expiry, ["-q", "1", "-t", "sensors/m/data", "-d"]),
            stdout: "piped",
            stderr: "piped",
          }).spawn();
          await waitFor(() => a.view.connected === 1, 5000, "mosquitto_sub connected to A");
          const onB = await client(b, id, version === "mqttv5" ? 5 : 4, false);
          if (version === "mqttv311") {
            // libmosquitto reconnects when the server closes: through A again, a newer claim.
            await waitFor(() => onB.seen.closedAt > 0, 5000, "B's connection taken back");
            sub.kill("SIGTERM");
          }
          const out = await sub.output();
          const text = new TextDecoder().decode(out.stdout);
          if (version === "mqttv5") {
            assert.match(text, /Received DISCONNECT \(142\)/, text);
            assert.equal(out.code, 0, "mosquitto_sub exits on the server's DISCONNECT");
            await onB.c.endAsync();
          } else {
            assert.equal(text.match(/sending CONNECT/g)?.length, 2, text);
          }
          await waitFor(() => a.view.connected === 0, 5000, "A holds no connection");
        }
      } finally {
        await a.stop();
        await b.stop();
        await iggy.close();
      }
    },
  });
}

for (const target of TARGETS) {
  Deno.test({
    name:
      `takeover across gateways (${target.name}): wills go out once where the connection ended (3.1.1), and not for an MQTT 5 session taken over and resumed within its will delay`,
    ignore: target.ignore,
    async fn() {
      const iggy = await target.open();
      const suffix = crypto.randomUUID().slice(0, 8);
      const a = await gatewayOn(iggy.address, `gw-a-${suffix}`, suffix);
      const b = await gatewayOn(iggy.address, `gw-b-${suffix}`, suffix);
      const topic = "sensors/w/data";
      try {
        const watcher = await client(b, `watcher-${suffix}`, 5, true);
        await watcher.c.subscribeAsync(topic, { qos: 1 });
        const pub = await client(b, `pub-${suffix}`, 5, true);
        const marker = async (m: string) => {
          await pub.c.publishAsync(topic, m, { qos: 1 });
          await waitFor(() => watcher.got.includes(m), 10_000, m);
        };
        await marker("start"); // the target exists, the watcher reads it

        const id4 = `will4-${suffix}`;
        const old4 = mqtt.connect(`mqtt://127.0.0.1:${a.port}`, {
          protocolVersion: 4,
          clientId: id4,
          clean: false,
          reconnectPeriod: 0,
          will: { topic, payload: "will-3.1.1", qos: 1, retain: false },
        });
        await new Promise((r) => old4.once("connect", r));
        const new4 = await client(b, id4, 4, false);
        await waitFor(() => watcher.got.includes("will-3.1.1"), 10_000, "the 3.1.1 will, at A");

        const id5 = `will5-${suffix}`;
        const old5 = mqtt.connect(`mqtt://127.0.0.1:${a.port}`, {
          protocolVersion: 5,
          clientId: id5,
          clean: false,
          reconnectPeriod: 0,
          properties: { sessionExpiryInterval: 3600 },
          will: {
            topic,
            payload: "will-5",
            qos: 1,
            retain: false,
            properties: { willDelayInterval: 60 },
          },
        });
        await new Promise((r) => old5.once("connect", r));
        const new5 = await client(b, id5, 5, false);
        await waitFor(() => a.view.connected === 0, 5000, "A's connections taken over");
        // A stopping sends every will it still holds: the MQTT 5 one must be gone by then.
        await a.stop();
        await marker("end");
        assert.deepEqual(watcher.got, ["start", "will-3.1.1", "end"]);
        old4.end(true);
        old5.end(true);
        for (const c of [new4, new5, watcher, pub]) await c.c.endAsync();
      } finally {
        await a.stop();
        await b.stop();
        await iggy.close();
      }
    },
  });
}

for (const target of TARGETS) {
  Deno.test({
    name:
      `takeover across gateways (${target.name}): with the session's gateway not answering, the resume waits session.takeover_wait_ms, says so, and loses nothing`,
    ignore: target.ignore,
    async fn() {
      const iggy = await target.open();
      const suffix = crypto.randomUUID().slice(0, 8);
      // A reads no claims in this test's time: a gateway gone without a word, as B sees it.
      const a = await gatewayOn(iggy.address, `gw-a-${suffix}`, suffix, {
        IGGY_MQTT_SESSION_CLAIM_POLL_INTERVAL_MS: "60000",
      });
      const waitMs = 600;
      const b = await gatewayOn(iggy.address, `gw-b-${suffix}`, suffix, {
        IGGY_MQTT_SESSION_TAKEOVER_WAIT_MS: String(waitMs),
      });
      const topic = "sensors/g/data";
      try {
        const pub = await client(b, `pub-${suffix}`, 5, true);
        await pub.c.publishAsync(topic, "create", { qos: 1 });
        const id = `gone-${suffix}`;
        const onA = await client(a, id, 5, false);
        await onA.c.subscribeAsync(topic, { qos: 1 });
        await pub.c.publishAsync(topic, "before", { qos: 1 });
        await waitFor(() => onA.got.includes("before"), 10_000, "A gets it");
        const t0 = performance.now();
        const onB = await client(b, id, 5, false);
        const tookMs = performance.now() - t0;
        assert.ok(tookMs >= waitMs && tookMs < waitMs + 2000, `CONNACK after ${tookMs} ms`);
        assert.equal(onB.connack.sessionPresent, true);
        assert.ok(b.logs.some((l) => l.includes("no release from the session's gateway in time")));
        for (let i = 0; i < 5; i++) await pub.c.publishAsync(topic, `after-${i}`, { qos: 1 });
        const after = Array.from({ length: 5 }, (_, i) => `after-${i}`);
        await waitFor(() => after.every((m) => onB.got.includes(m)), 10_000, "B gets them all");
        onA.c.end(true);
        await onB.c.endAsync();
        await pub.c.endAsync();
      } finally {
        await a.stop();
        await b.stop();
        await iggy.close();
      }
    },
  });
}
