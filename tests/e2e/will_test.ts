/**
 * Wills end to end (DESIGN §2): accepted at CONNECT after the map and the send right are
 * checked, published through the produce path when a connection ends without DISCONNECT
 * (socket reset, killed process, keep-alive expiry, takeover, gateway stop), never after a
 * clean DISCONNECT. Real clients: paho-mqtt, mosquitto_sub/mosquitto_pub, MQTT.js.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import mqttPacket from "mqtt-packet";
import { openStoreReadOnly } from "../helpers/store.ts";
import type { LogBackend, StoredMessage } from "../../src/log/port.ts";
import { hashPassword } from "../../src/access/password.ts";
import {
  HAS_MOSQUITTO_CLIENTS,
  hasCommand,
  RawClient,
  run,
  startGateway,
  type TestGateway,
  waitFor,
} from "../helpers/gateway.ts";

const opts = {};
const PAHO_SCRIPT = new URL("../clients/paho_will.py", import.meta.url).pathname;
const HAS_PAHO = hasCommand("python3") &&
  new Deno.Command("python3", { args: ["-c", "import paho.mqtt"], stderr: "null" }).outputSync()
    .success;
if (!HAS_PAHO) {
  console.warn(
    "WARNING: python3 with paho-mqtt not found; the paho-mqtt will tests are SKIPPED " +
      "(python3 -m pip install paho-mqtt).",
  );
}

/** The will topic of the tests: rule 1 of the design map → building_north/telemetry. */
const WILL_TOPIC = "building/north/room/7/status";

async function usersToml(): Promise<string> {
  const h = await hashPassword("right-password", 1000);
  return `
[[users]]
username = "writer"
password_hash = "${h}"
[users.permissions.streams.building_north.topics.telemetry]
send_messages = true
`;
}

/** Every stored message of a stream/topic, all partitions. */
async function stored(b: LogBackend, stream: string, topic: string): Promise<StoredMessage[]> {
  const info = await b.getTopic(stream, topic);
  if (info === null) return [];
  const out: StoredMessage[] = [];
  for (let p = 0; p < info.partitions; p++) {
    out.push(...await b.poll({ stream, topic, partition: p }, 0, 1000));
  }
  return out;
}

/** The wills stored for `topic`, as header objects. */
async function storedWills(b: LogBackend): Promise<Record<string, string>[]> {
  return (await stored(b, "building_north", "telemetry"))
    .filter((m) => m.headers.get("mqtt.will") === "true")
    .map((m) => Object.fromEntries(m.headers));
}

/** An MQTT.js subscriber of `topic` that records what it receives. */
async function subscriber(gw: TestGateway, topic = WILL_TOPIC) {
  const got: { topic: string; payload: string }[] = [];
  const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, { reconnectPeriod: 0 });
  c.on("message", (t, p) => got.push({ topic: t, payload: new TextDecoder().decode(p) }));
  await c.subscribeAsync(topic, { qos: 1 });
  return { got, close: () => c.endAsync() };
}

/** A raw CONNECT with a will (mqtt-packet encodes it). */
function connectWithWill(clientId: string, keepalive = 60): Uint8Array {
  return new Uint8Array(mqttPacket.generate({
    cmd: "connect",
    protocolId: "MQTT",
    protocolVersion: 4,
    clean: true,
    clientId,
    keepalive,
    will: { topic: WILL_TOPIC, payload: Buffer.from(`${clientId} gone`), qos: 1, retain: false },
  }));
}

async function paho(gw: TestGateway, id: string, mode: string, user: string[] = []) {
  const r = await run("python3", [PAHO_SCRIPT, String(gw.port), id, WILL_TOPIC, mode, ...user]);
  assert.equal(r.code, 0, r.stderr);
  return r.stdout;
}

Deno.test({
  name:
    "will (paho-mqtt): a socket reset publishes the will to a live subscriber and into the log with mqtt.will",
  ignore: !HAS_PAHO,
  ...opts,
  async fn() {
    const gw = await startGateway();
    const sub = await subscriber(gw);
    try {
      assert.match(await paho(gw, "tasmota-7", "reset"), /connack 0\ndone/);
      await waitFor(() => sub.got.length === 1, 5000, "the will at the subscriber");
      assert.deepEqual(sub.got, [{ topic: WILL_TOPIC, payload: "offline" }]);
      const wills = await storedWills(gw.view.log);
      assert.equal(wills.length, 1);
      assert.equal(wills[0]["mqtt.topic"], WILL_TOPIC);
      assert.equal(wills[0]["mqtt.client_id"], "tasmota-7");
      assert.equal(wills[0]["mqtt.qos"], "1");
      assert.equal(wills[0]["mqtt.retain"], "true");
      assert.equal(wills[0]["mqtt.packet_id"], undefined);
      // Counted once the append is durable, which can be after the live subscriber got it.
      await waitFor(
        () => gw.view.metrics.publishes.get({ outcome: "appended" }) === 1,
        5000,
        "appended",
      );
    } finally {
      await sub.close();
      await gw.stop();
    }
  },
});

Deno.test({
  name: "will (paho-mqtt): after a clean DISCONNECT nothing is published",
  ignore: !HAS_PAHO,
  ...opts,
  async fn() {
    const gw = await startGateway();
    const sub = await subscriber(gw);
    try {
      assert.match(await paho(gw, "shelly-1", "disconnect"), /connack 0\ndone/);
      await waitFor(() => gw.view.connections === 1, 3000, "the device to be gone");
      // A message after it, through the same path: once it arrives, a will would have too.
      const p = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, { reconnectPeriod: 0 });
      await p.publishAsync(WILL_TOPIC, "sentinel", { qos: 1 });
      await p.endAsync();
      await waitFor(() => sub.got.length >= 1, 5000, "the sentinel");
      assert.deepEqual(sub.got.map((m) => m.payload), ["sentinel"]);
      assert.deepEqual(await storedWills(gw.view.log), []);
    } finally {
      await sub.close();
      await gw.stop();
    }
  },
});

Deno.test({
  name: "will on a topic the user may not send to gets CONNACK 5 (paho-mqtt and mosquitto_pub)",
  ignore: !HAS_PAHO && !HAS_MOSQUITTO_CLIENTS,
  ...opts,
  async fn() {
    const gw = await startGateway({ toml: await usersToml() });
    try {
      const creds = ["-u", "writer", "-P", "right-password"];
      if (HAS_PAHO) {
        // The user may send to building_north/telemetry, so WILL_TOPIC itself is accepted.
        assert.match(
          await paho(gw, "ok-1", "disconnect", ["writer", "right-password"]),
          /connack 0/,
        );
        const r = await run("python3", [
          PAHO_SCRIPT,
          String(gw.port),
          "no-1",
          "building/south/room/1/status",
          "connack",
          "writer",
          "right-password",
        ]);
        // paho 2 reports a 3.1.1 return code as its MQTT 5 equivalent: 5 → 0x87 (135).
        assert.match(r.stdout, /connack 135\n/);
      }
      if (HAS_MOSQUITTO_CLIENTS) {
        const r = await run("mosquitto_pub", [
          ...["-h", "127.0.0.1", "-p", String(gw.port), ...creds, "-i", "no-2"],
          ...["--will-topic", "building/south/room/1/status", "--will-payload", "x"],
          ...["-t", WILL_TOPIC, "-m", "hello", "-q", "1"],
        ]);
        assert.notEqual(r.code, 0);
        assert.match(r.stderr, /not authori[sz]ed/i);
      }
      assert.deepEqual(await storedWills(gw.view.log), []);
      assert.ok(gw.view.metrics.connectionsRefused.get({ reason: "connack_5" }) >= 1);
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "will (mosquitto_sub): a killed client process has its will delivered to mosquitto_sub",
  ignore: !HAS_MOSQUITTO_CLIENTS,
  ...opts,
  async fn() {
    const gw = await startGateway();
    const base = ["-h", "127.0.0.1", "-p", String(gw.port)];
    const listener = new Deno.Command("mosquitto_sub", {
      args: [...base, "-i", "dashboard", "-t", WILL_TOPIC, "-q", "1", "-C", "1", "-v"],
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const device = new Deno.Command("mosquitto_sub", {
      args: [...base, "-i", "zigbee2mqtt", "-t", "building/north/room/7/set", "-q", "1"]
        .concat(["--will-topic", WILL_TOPIC, "--will-payload", "offline", "--will-qos", "1"]),
      stdout: "null",
      stderr: "null",
    }).spawn();
    try {
      await waitFor(() => gw.view.connections === 2, 5000, "both clients connected");
      // Both have subscribed once the gateway holds their subscriptions.
      await waitFor(
        () => gw.view.subscriptions(WILL_TOPIC) !== undefined,
        5000,
        "the dashboard's subscription",
      );
      device.kill("SIGKILL");
      await device.status;
      const timer = setTimeout(() => listener.kill("SIGKILL"), 10_000);
      const out = await listener.output();
      clearTimeout(timer);
      assert.equal(new TextDecoder().decode(out.stdout).trim(), `${WILL_TOPIC} offline`);
      const wills = await storedWills(gw.view.log);
      assert.deepEqual(wills.map((w) => w["mqtt.client_id"]), ["zigbee2mqtt"]);
    } finally {
      try {
        listener.kill("SIGKILL");
      } catch { /* exited */ }
      await gw.stop();
    }
  },
});

Deno.test({
  name: "will: keep-alive expiry, takeover and a protocol error publish the will; each once",
  ...opts,
  async fn() {
    const gw = await startGateway();
    const sub = await subscriber(gw);
    try {
      const silent = await RawClient.connect(gw.port);
      await silent.send(connectWithWill("silent", 1));
      assert.deepEqual([...(await silent.readPacket())!], [0x20, 2, 0, 0]);
      const first = await RawClient.connect(gw.port);
      await first.send(connectWithWill("twin"));
      assert.deepEqual([...(await first.readPacket())!], [0x20, 2, 0, 0]);
      const second = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        clientId: "twin",
        reconnectPeriod: 0,
      });
      assert.ok(await first.closedByPeer());
      const rude = await RawClient.connect(gw.port);
      await rude.send(connectWithWill("rude"));
      assert.deepEqual([...(await rude.readPacket())!], [0x20, 2, 0, 0]);
      await rude.send([0x30, 0]); // a truncated PUBLISH: protocol error, closed
      assert.ok(await rude.closedByPeer());
      assert.ok(await silent.closedByPeer(4000), "keep-alive expiry");
      await waitFor(() => sub.got.length === 3, 5000, "three wills");
      assert.deepEqual(sub.got.map((m) => m.payload).sort(), [
        "rude gone",
        "silent gone",
        "twin gone",
      ]);
      await second.endAsync();
      [silent, first, rude].forEach((c) => c.close());
      assert.equal((await storedWills(gw.view.log)).length, 3);
    } finally {
      await sub.close();
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "will: a graceful stop publishes the wills of the connections it closes, before the log closes",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const clients = [];
      for (const id of ["edge-1", "edge-2"]) {
        const c = await RawClient.connect(gw.port);
        await c.send(connectWithWill(id));
        assert.deepEqual([...(await c.readPacket())!], [0x20, 2, 0, 0]);
        clients.push(c);
      }
      await gw.gateway.stop();
      clients.forEach((c) => c.close());
      const store = await openStoreReadOnly(gw.config.embedded.path);
      try {
        const wills = await storedWills(store);
        assert.deepEqual(wills.map((w) => w["mqtt.client_id"]).sort(), ["edge-1", "edge-2"]);
      } finally {
        await store.close();
      }
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "session.will = refuse: a CONNECT with a will gets CONNACK 5",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_SESSION_WILL: "refuse" } });
    try {
      const c = await RawClient.connect(gw.port);
      await c.send(connectWithWill("refused"));
      assert.deepEqual([...(await c.readPacket())!], [0x20, 2, 0, 5]);
      assert.ok(await c.closedByPeer());
    } finally {
      await gw.stop();
    }
  },
});
