/**
 * MQTT 5 CONNECT / CONNACK with real clients (MQTT.js `protocolVersion: 5`, paho-mqtt
 * `MQTTv5`): the CONNACK promises only what the gateway implements, says what it changed from
 * the client's ask, and refuses with MQTT 5 reason codes and a reason string.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import mqtt from "mqtt";
import { hashPassword } from "../../src/access/password.ts";
import { hasCommand, run, startGateway } from "../helpers/gateway.ts";

const opts = {};

// deno-lint-ignore no-explicit-any
type Packet = any;

Deno.test({
  name:
    "MQTT 5 CONNACK properties: capabilities, assigned client id, server keep-alive when clamped, session expiry capped to session.max_expiry_s",
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: { IGGY_MQTT_LIMITS_MAX_KEEP_ALIVE_S: "120", IGGY_MQTT_SESSION_MAX_EXPIRY_S: "600" },
    });
    try {
      const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        protocolVersion: 5,
        clientId: "",
        keepalive: 0,
        reconnectPeriod: 0,
        properties: { sessionExpiryInterval: 3600 },
      });
      const connack: Packet = (c as Packet).connackPacket;
      assert.equal(connack.reasonCode, 0);
      assert.equal(connack.sessionPresent, false);
      const p = connack.properties;
      assert.match(p.assignedClientIdentifier, /^auto-/);
      assert.deepEqual(
        {
          sessionExpiryInterval: p.sessionExpiryInterval,
          receiveMaximum: p.receiveMaximum,
          maximumQoS: p.maximumQoS,
          retainAvailable: p.retainAvailable,
          maximumPacketSize: p.maximumPacketSize,
          topicAliasMaximum: p.topicAliasMaximum,
          wildcardSubscriptionAvailable: p.wildcardSubscriptionAvailable,
          subscriptionIdentifiersAvailable: p.subscriptionIdentifiersAvailable,
          sharedSubscriptionAvailable: p.sharedSubscriptionAvailable,
          serverKeepAlive: p.serverKeepAlive,
        },
        {
          sessionExpiryInterval: 600,
          receiveMaximum: 64,
          maximumQoS: undefined, // absent: QoS 2 [MQTT-3.2.2-9]
          retainAvailable: undefined, // absent: 1, retained messages are kept
          maximumPacketSize: 1_048_576,
          topicAliasMaximum: 16,
          wildcardSubscriptionAvailable: true,
          subscriptionIdentifiersAvailable: true,
          sharedSubscriptionAvailable: undefined, // absent: 1
          serverKeepAlive: 120,
        },
      );
      await c.endAsync();
      // Nothing changed from the ask: no session expiry, no keep-alive, no assigned id.
      const plain = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        protocolVersion: 5,
        clientId: "plain",
        keepalive: 30,
        reconnectPeriod: 0,
      });
      const q = (plain as Packet).connackPacket.properties;
      assert.equal(q.sessionExpiryInterval, undefined);
      assert.equal(q.serverKeepAlive, undefined);
      assert.equal(q.assignedClientIdentifier, undefined);
      await plain.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

/** The CONNACK reason code MQTT.js reports for a refused CONNECT. */
function refusal(port: number, o: Record<string, unknown>): Promise<number> {
  return mqtt.connectAsync(`mqtt://127.0.0.1:${port}`, {
    protocolVersion: 5,
    reconnectPeriod: 0,
    ...o,
  }).then((c) => (c.end(true), 0), (e) => e.code);
}

Deno.test({
  name:
    "MQTT 5 CONNACK refusals: 0x8C authentication method, 0x85 client id not valid, 0x86 bad password, 0x87 not authorized; a QoS 2 will and a retained will are accepted",
  ...opts,
  async fn() {
    const hash = await hashPassword("right", 1000);
    const gw = await startGateway({
      toml: `[[users]]\nusername = "u"\npassword_hash = "${hash}"\n` +
        `[users.permissions.global]\nsend_messages = true\npoll_messages = true\n`,
      env: { IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "false", IGGY_MQTT_AUTH_FAILURE_BACKOFF_MS: "0" },
    });
    try {
      const port = gw.port;
      const auth = { username: "u", password: "right" };
      assert.equal(
        await refusal(port, { ...auth, properties: { authenticationMethod: "SCRAM" } }),
        0x8c,
      );
      assert.equal(await refusal(port, { ...auth, clientId: "dev#1" }), 0x85);
      assert.equal(await refusal(port, { username: "u", password: "wrong" }), 0x86);
      assert.equal(await refusal(port, {}), 0x87); // anonymous access is disabled
      const will = (qos: number, retain: boolean) => ({
        ...auth,
        will: { topic: "sensors/w/data", payload: Buffer.from("x"), qos, retain },
      });
      assert.equal(await refusal(port, will(1, true)), 0); // a retained will: accepted
      assert.equal(await refusal(port, will(2, false)), 0);
      assert.equal(await refusal(port, will(1, false)), 0);
    } finally {
      await gw.stop();
    }
  },
});

const HAS_PAHO = hasCommand("python3") &&
  new Deno.Command("python3", { args: ["-c", "import paho.mqtt"], stderr: "null" }).outputSync()
    .success;

Deno.test({
  name:
    "paho-mqtt MQTTv5 connects asking for coordinates, publishes QoS 1 with a user property and gets PUBACK 0 with coordinates",
  ignore: !HAS_PAHO,
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const script = `
import sys, time
import paho.mqtt.client as mqtt
from paho.mqtt.properties import Properties
from paho.mqtt.packettypes import PacketTypes
c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="paho5", protocol=mqtt.MQTTv5)
out = {}
c.on_connect = lambda c, u, f, rc, p: out.setdefault("rc", rc.value)
c.on_publish = lambda c, u, mid, rc, p: out.setdefault("puback", (rc.value, p.UserProperty if hasattr(p, "UserProperty") else None))
cp = Properties(PacketTypes.CONNECT)
cp.UserProperty = ("iggy-coordinates", "1")
c.connect("127.0.0.1", int(sys.argv[1]), properties=cp)
c.loop_start()
while "rc" not in out: time.sleep(0.01)
props = Properties(PacketTypes.PUBLISH)
props.UserProperty = ("site", "north")
c.publish("sensors/p5/data", b"21.5", qos=1, properties=props)
deadline = time.time() + 5
while "puback" not in out and time.time() < deadline: time.sleep(0.01)
print(out.get("rc"), out.get("puback"))
c.loop_stop()
`;
      const r = await run("python3", ["-c", script, String(gw.port)]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(
        r.stdout,
        /^0 \(0, \[.*\('iggy\.stream', 'sensors'\).*\('iggy\.offset', '\d+'\)/,
      );
      const stored = [];
      for (let p = 0; p < 3; p++) {
        const a = { stream: "sensors", topic: "sensor_data", partition: p };
        stored.push(...await gw.view.log.poll(a, 0, 10));
      }
      assert.equal(stored[0].headers.get("mqtt5.user.0.site"), "north");
    } finally {
      await gw.stop();
    }
  },
});
