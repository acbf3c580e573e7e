/**
 * Client certificates in Iggy mode, over the fake Iggy in both dialects: the certificate's name
 * is looked up as the Iggy user of that name by the gateway's own account (GET_USER), and that
 * user's Iggy permissions apply; no password travels. A name Iggy does not know gets CONNACK 5.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";
import { startGateway, type TestGateway } from "../helpers/gateway.ts";
import { hasOpenssl, type IssuedCertificate, makeClientPki } from "../helpers/client_pki.ts";

const opts = {};
const FIX = new URL("../fixtures/tls/", import.meta.url).pathname;
const HAS_OPENSSL = await hasOpenssl();
if (!HAS_OPENSSL) {
  console.warn("WARNING: openssl not found; the Iggy-mode client certificate tests are SKIPPED");
}

/** How an MQTT.js connection with `cert` ended: null (connected) or its error. */
async function attempt(
  gw: TestGateway,
  cert: IssuedCertificate,
  o: mqtt.IClientOptions = {},
): Promise<{ client: mqtt.MqttClient; error: { code?: number; message: string } | null }> {
  const client = mqtt.connect(`mqtts://localhost:${gw.port}`, {
    ca: await Deno.readTextFile(`${FIX}server.crt`),
    cert: await Deno.readTextFile(cert.crt),
    key: await Deno.readTextFile(cert.key),
    reconnectPeriod: 0,
    connectTimeout: 5000,
    ...o,
  });
  const error = await new Promise<{ code?: number; message: string } | null>((resolve) => {
    client.once("connect", () => resolve(null));
    client.once("error", (e) => resolve(e as { code?: number; message: string }));
    client.once("close", () => resolve({ message: "closed" }));
  });
  return { client, error };
}

for (const dialect of ["0.11", "0.12"] as const) {
  Deno.test({
    name: `Iggy ${dialect}: a device certificate logs in as the Iggy user of its name, with that ` +
      "user's Iggy permissions; an unknown name gets CONNACK 5",
    ignore: !HAS_OPENSSL,
    ...opts,
    async fn() {
      const pki = await makeClientPki();
      const store = new FakeStore();
      store.createStream("sensors");
      store.namedUsers.set("sensor-7", { id: 7, stream: "sensors", send: true, poll: true });
      const node = new FakeNode({ dialect, store });
      const device = await pki.deviceCa.issue({ cn: "sensor-7" });
      const stranger = await pki.deviceCa.issue({ cn: "nobody" });
      const gw = await startGateway({
        env: {
          IGGY_MQTT_GATEWAY_BACKEND: "iggy",
          IGGY_MQTT_IGGY_ADDRESS: node.listen(),
          IGGY_MQTT_IGGY_PASSWORD: "iggy",
          IGGY_MQTT_LISTENERS_TCP: "",
          IGGY_MQTT_LISTENERS_TLS: "127.0.0.1:0",
          IGGY_MQTT_LISTENERS_TLS_CERT_FILE: `${FIX}server.crt`,
          IGGY_MQTT_LISTENERS_TLS_KEY_FILE: `${FIX}server.key`,
          IGGY_MQTT_LISTENERS_TLS_CLIENT_AUTH: "require",
          IGGY_MQTT_LISTENERS_TLS_CLIENT_CA_FILE: pki.deviceCa.crt,
          IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "false",
        },
      });
      try {
        const { client, error } = await attempt(gw, device, { protocolVersion: 5 });
        assert.equal(error, null, "the device is in");
        try {
          await client.publishAsync("sensors/s7/data", "21.5", { qos: 1 });
          await assert.rejects(
            client.publishAsync("building/north/room/1/temp", "x", { qos: 1 }),
            (e: { code?: number }) => e.code === 0x87,
            "no right on stream building_north",
          );
        } finally {
          await client.endAsync();
        }
        const stored = [...store.streams.get("sensors")!.topics.get("sensor_data")!.partitions]
          .flatMap((p) => store.payloads("sensors", "sensor_data", p.id));
        assert.deepEqual(stored, ["21.5"]);

        const unknown = await attempt(gw, stranger);
        await unknown.client.endAsync(true);
        assert.equal(unknown.error?.code, 5, `no Iggy user "nobody": ${unknown.error?.message}`);
      } finally {
        await gw.stop();
        await node.close();
        await pki.remove();
      }
    },
  });
}
