/**
 * Retained messages end to end (DESIGN §4, issue 38): set by a PUBLISH with RETAIN, cleared by an
 * empty one, kept in the log across restarts, sent to new subscriptions (wildcards included)
 * flagged RETAIN at min(QoS published, QoS granted); MQTT 5 Retain Handling and Retain As
 * Published; the bounds (MQTT 5: PUBACK 0x97; 3.1.1: appended, not retained, counted). Real
 * clients: MQTT.js (3.1.1 and 5), mosquitto_sub.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { startGateway, testEnv, type TestGateway, waitFor } from "../helpers/gateway.ts";
import { loadConfig } from "../../src/config/load.ts";
import { cli, ROOT } from "../helpers/cli.ts";
import { mqttjsPing } from "./_subscribe_helpers.ts";
import { removeStore } from "../helpers/store.ts";

const opts = {};

interface Got {
  topic: string;
  payload: string;
  retain: boolean;
  qos: number;
}

/** An MQTT.js client that records every PUBLISH it receives. */
async function client(gw: TestGateway, v5 = false, id?: string) {
  const got: Got[] = [];
  const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
    reconnectPeriod: 0,
    protocolVersion: v5 ? 5 : 4,
    ...(id ? { clientId: id } : {}),
  });
  c.on("message", (topic, p, packet) => {
    got.push({
      topic,
      payload: new TextDecoder().decode(p),
      retain: packet.retain,
      qos: packet.qos,
    });
  });
  return { c, got };
}

/**
 * Barrier: a SUBSCRIBE's retained copies are queued right after its SUBACK, before the client's
 * next packet is read, so once the PINGRESP is in every copy is too.
 */
async function retainedSent(c: mqtt.MqttClient): Promise<void> {
  await mqttjsPing(c);
}

function byTopic(got: Got[]): string[] {
  return got.map((g) => `${g.topic}=${g.payload}${g.retain ? " (retained)" : ""} q${g.qos}`).sort();
}

Deno.test({
  name:
    "retained: set, delivered to a new wildcard subscription flagged RETAIN at min(QoS published, granted), cleared by an empty payload",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const pub = await client(gw);
      await pub.c.publishAsync("home/kitchen/temp", "21", { qos: 1, retain: true });
      await pub.c.publishAsync("home/hall/temp", "19", { qos: 0, retain: true });
      await pub.c.publishAsync("home/hall/light", "on", { qos: 1, retain: false });
      await waitFor(() => gw.view.retainedCount === 2, 3000, "both retained");
      const sub = await client(gw);
      await sub.c.subscribeAsync("home/+/temp", { qos: 1 });
      await waitFor(() => sub.got.length >= 2, 3000, "retained at subscribe");
      await retainedSent(sub.c);
      assert.deepEqual(byTopic(sub.got), [
        "home/hall/temp=19 (retained) q0",
        "home/kitchen/temp=21 (retained) q1",
      ]);
      // A live message to a subscribed topic is not flagged [MQTT-3.3.1-9].
      await pub.c.publishAsync("home/kitchen/temp", "22", { qos: 1, retain: true });
      await waitFor(() => sub.got.length === 3, 3000, "live copy");
      assert.equal(sub.got[2].retain, false);
      // Granted QoS 0 caps the retained copy's QoS.
      const low = await client(gw);
      await low.c.subscribeAsync("home/kitchen/temp", { qos: 0 });
      await waitFor(() => low.got.length === 1, 3000, "retained at QoS 0");
      assert.deepEqual(byTopic(low.got), ["home/kitchen/temp=22 (retained) q0"]);
      // Empty payload clears; a new subscriber gets nothing for it.
      await pub.c.publishAsync("home/kitchen/temp", "", { qos: 1, retain: true });
      const late = await client(gw);
      await late.c.subscribeAsync("home/#", { qos: 1 });
      await waitFor(() => late.got.length >= 1, 3000, "hall temp");
      await retainedSent(late.c);
      assert.deepEqual(byTopic(late.got), ["home/hall/temp=19 (retained) q0"]);
      const metrics = await (await fetch(`http://127.0.0.1:${gw.httpPort}/metrics`)).text();
      assert.match(metrics, /^mqtt_retained_messages 1$/m);
      const status = await (await fetch(`http://127.0.0.1:${gw.httpPort}/status.json`)).json();
      assert.equal(status.retained.topics, 1);
      assert.ok(status.retained.bytes > "home/hall/temp".length + 2);
      for (const x of [pub, sub, low, late]) await x.c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "retained: the set survives a restart; a clear survives one too; the record topic is hidden from '#'",
  ...opts,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "iggy-mqtt-retained-" });
    const env = { IGGY_MQTT_EMBEDDED_PATH: `${dir}/gateway.db` };
    try {
      let gw = await startGateway({ env });
      let pub = await client(gw);
      await pub.c.publishAsync("plant/line1/state", "running", { qos: 1, retain: true });
      await pub.c.publishAsync("plant/line2/state", "stopped", { qos: 1, retain: true });
      await pub.c.endAsync();
      await gw.stop();

      gw = await startGateway({ env });
      let sub = await client(gw);
      await sub.c.subscribeAsync("#", { qos: 1 });
      await waitFor(() => sub.got.length >= 2, 3000, "retained after restart");
      await retainedSent(sub.c);
      assert.deepEqual(byTopic(sub.got), [
        "plant/line1/state=running (retained) q1",
        "plant/line2/state=stopped (retained) q1",
      ]);
      pub = await client(gw);
      await pub.c.publishAsync("plant/line1/state", "", { qos: 1, retain: true });
      await pub.c.endAsync();
      await sub.c.endAsync();
      await gw.stop();

      gw = await startGateway({ env });
      sub = await client(gw);
      await sub.c.subscribeAsync("plant/+/state", { qos: 1 });
      await waitFor(() => sub.got.length >= 1, 3000, "line2 after restart");
      await retainedSent(sub.c);
      assert.deepEqual(byTopic(sub.got), ["plant/line2/state=stopped (retained) q1"]);
      await sub.c.endAsync();
      await gw.stop();
    } finally {
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name:
    "retained (MQTT 5): Retain Handling 0/1/2, Retain As Published on live copies, user properties and Message Expiry kept",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const pub = await client(gw, true);
      await pub.c.publishAsync("dev/1/config", "{}", {
        qos: 1,
        retain: true,
        properties: { userProperties: { kind: "config" }, messageExpiryInterval: 3600 },
      });
      const a = await client(gw, true);
      const props: unknown[] = [];
      a.c.on("message", (_t, _p, packet) => props.push(packet.properties));
      await a.c.subscribeAsync("dev/+/config", { qos: 1, rh: 1 });
      await waitFor(() => a.got.length === 1, 3000, "rh 1, new subscription");
      const p = props[0] as {
        userProperties?: Record<string, string>;
        messageExpiryInterval?: number;
      };
      assert.deepEqual({ ...p.userProperties }, { kind: "config" });
      assert.ok(p.messageExpiryInterval! > 3590 && p.messageExpiryInterval! <= 3600);
      await a.c.subscribeAsync("dev/+/config", { qos: 1, rh: 1 }); // exists: nothing
      await a.c.subscribeAsync("dev/#", { qos: 1, rh: 2 }); // never
      await retainedSent(a.c);
      assert.equal(a.got.length, 1);
      await a.c.subscribeAsync("dev/+/config", { qos: 1, rh: 0 }); // again, always
      await waitFor(() => a.got.length === 2, 3000, "rh 0 again");
      assert.ok(a.got.every((g) => g.retain));
      // Retain As Published: a live retained PUBLISH keeps its flag only for rap subscriptions.
      const rap = await client(gw, true);
      await rap.c.subscribeAsync("live/x", { qos: 1, rap: true });
      const plain = await client(gw, true);
      await plain.c.subscribeAsync("live/x", { qos: 1 });
      await pub.c.publishAsync("live/x", "v", { qos: 1, retain: true });
      await waitFor(() => rap.got.length === 1 && plain.got.length === 1, 3000, "live copies");
      assert.equal(rap.got[0].retain, true);
      assert.equal(plain.got[0].retain, false);
      for (const x of [pub, a, rap, plain]) await x.c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "retained bounds: over limits.max_retained_messages MQTT 5 gets PUBACK 0x97 (nothing appended); 3.1.1 is appended, not retained, counted",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_LIMITS_MAX_RETAINED_MESSAGES: "2" } });
    try {
      const v5 = await client(gw, true);
      await v5.c.publishAsync("b/1", "x", { qos: 1, retain: true });
      await v5.c.publishAsync("b/2", "x", { qos: 1, retain: true });
      const refused = await v5.c.publishAsync("b/3", "x", { qos: 1, retain: true }).then(
        () => null,
        (err: { code?: number }) => err.code,
      );
      assert.equal(refused, 0x97);
      await v5.c.publishAsync("b/1", "replaced", { qos: 1, retain: true }); // known topic: fine
      const v3 = await client(gw);
      const watcher = await client(gw);
      await watcher.c.subscribeAsync("c/#", { qos: 1 });
      await v3.c.publishAsync("c/1", "kept as a message", { qos: 1, retain: true });
      await waitFor(() => watcher.got.length === 1, 3000, "appended though not retained");
      const sub = await client(gw);
      await sub.c.subscribeAsync("#", { qos: 1 });
      await waitFor(() => sub.got.length >= 2, 3000, "retained set");
      await retainedSent(sub.c);
      assert.deepEqual(byTopic(sub.got), ["b/1=replaced (retained) q1", "b/2=x (retained) q1"]);
      const metrics = await (await fetch(`http://127.0.0.1:${gw.httpPort}/metrics`)).text();
      assert.match(metrics, /^mqtt_retained_refused_total 2$/m);
      assert.ok(gw.logs.some((l) => l.includes("limits.max_retained_messages")));
      for (const x of [v5, v3, watcher, sub]) await x.c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "retained: receiving needs the poll right on the target the topic maps to",
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: { IGGY_MQTT_AUTH_ANONYMOUS_PERMISSIONS: "send_poll" },
      toml: `
[[users]]
username = "sender"
password_hash = "${await (await import("../../src/access/password.ts")).hashPassword("pw", 1000)}"
[users.permissions.global]
send_messages = true
`,
    });
    try {
      const pub = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        reconnectPeriod: 0,
        username: "sender",
        password: "pw",
      });
      await pub.publishAsync("sensors/s1/data", "42", { qos: 1, retain: true });
      const deaf = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        reconnectPeriod: 0,
        username: "sender",
        password: "pw",
      });
      const got: string[] = [];
      deaf.on("message", (t) => got.push(t));
      const granted = await deaf.subscribeAsync("sensors/+/data", { qos: 1 }).then(
        (g) => g[0].qos,
        () => 128,
      );
      await retainedSent(deaf);
      assert.equal(granted, 128); // no poll right: refused, and no retained copy
      assert.deepEqual(got, []);
      const anon = await client(gw);
      await anon.c.subscribeAsync("sensors/+/data", { qos: 1 });
      await waitFor(() => anon.got.length === 1, 3000, "anonymous send_poll gets it");
      await pub.endAsync();
      await deaf.endAsync();
      await anon.c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "read --retained [--filter F] lists the retained set beside a running gateway; a bad filter exits 2 naming it",
  ...opts,
  async fn() {
    await Deno.mkdir(`${ROOT}data`, { recursive: true });
    const db = `data/retained-${crypto.randomUUID()}.db`;
    const gw = await startGateway({ env: { IGGY_MQTT_EMBEDDED_PATH: `${ROOT}${db}` } });
    try {
      const pub = await client(gw);
      await pub.c.publishAsync("home/b/state", "off", { qos: 1, retain: true });
      await pub.c.publishAsync("home/a/state", "on", { qos: 1, retain: true });
      await pub.c.publishAsync("garage/door", "shut", { qos: 1, retain: true });
      await pub.c.publishAsync("garage/door", "", { qos: 1, retain: true });
      await pub.c.endAsync();
      const env = { IGGY_MQTT_EMBEDDED_PATH: db };
      const all = await cli(["read", "--retained"], { env });
      assert.equal(all.code, 0, all.stderr);
      assert.deepEqual(all.stdout.trim().split("\n"), ["home/a/state on", "home/b/state off"]);
      const some = await cli(["read", "--retained", "--filter", "home/a/+", "--json"], { env });
      assert.equal(some.code, 0, some.stderr);
      const m = JSON.parse(some.stdout.trim());
      assert.equal(m.topic, "home/a/state");
      assert.equal(m.payload, "on");
      assert.equal(m.headers["mqtt.retain"], "true");
      const bad = await cli(["read", "--retained", "--filter", "a/#/b"], { env });
      assert.equal(bad.code, 2);
      assert.match(bad.stderr, /--filter "a\/#\/b"/);
    } finally {
      await gw.stop();
      await removeStore(`${ROOT}${db}`);
    }
  },
});

Deno.test({
  name:
    "retained: a reload keeps retained messages whose topics still map and clears (and names) those that no longer do",
  ...opts,
  async fn() {
    const gw = await startGateway();
    const mapFile = `${gw.dir}/map.toml`;
    try {
      const pub = await client(gw);
      await pub.c.publishAsync("dead/", "gone after the reload", { qos: 1, retain: true });
      await pub.c.publishAsync("alive/1", "kept", { qos: 1, retain: true });
      await pub.c.endAsync();
      // The new map sends dead/<x> to stream <x>: "dead/" would go to stream "", not a name.
      await Deno.writeTextFile(
        mapFile,
        `default_stream = "sensors"\ndefault_topic = "messages_default"\n` +
          `[[rule]]\nmqtt_topic = 'dead/([^/]*)'\nstream = '$1'\ntopic = 't'\n`,
      );
      const next = loadConfig({
        text: "",
        source: "test.toml",
        env: testEnv(gw.dir, { IGGY_MQTT_MAPPING_MAP_FILE: mapFile }),
      });
      await gw.gateway.reload(next);
      assert.ok(gw.logs.some((l) => l.includes("no longer map") && l.includes('"dead/"')));
      const sub = await client(gw);
      await sub.c.subscribeAsync("#", { qos: 1 });
      await waitFor(() => sub.got.length >= 1, 3000, "kept one");
      await retainedSent(sub.c);
      assert.deepEqual(byTopic(sub.got), ["alive/1=kept (retained) q1"]);
      await sub.c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "retained: a retained will sets its topic's retained message when it is published",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const dev = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        reconnectPeriod: 0,
        protocolVersion: 5,
        will: { topic: "dev/7/status", payload: Buffer.from("offline"), qos: 1, retain: true },
      });
      dev.stream.destroy(); // gone without a DISCONNECT: the will goes out
      await waitFor(() => gw.view.retainedCount === 1, 3000, "will retained");
      const sub = await client(gw);
      await sub.c.subscribeAsync("dev/+/status", { qos: 1 });
      await waitFor(() => sub.got.length === 1, 3000, "retained will");
      assert.deepEqual(byTopic(sub.got), ["dev/7/status=offline (retained) q1"]);
      await sub.c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});
