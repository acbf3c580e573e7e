/**
 * Client certificates in Iggy mode, over the fake Iggy in both dialects: the certificate's name
 * is looked up as the Iggy user of that name by the gateway's own account (GET_USER), and that
 * user's Iggy permissions apply; no password travels. A name Iggy does not know gets CONNACK 5.
 */
import assert from "node:assert/strict";
import { FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";
import { startGateway } from "../helpers/gateway.ts";
import { hasOpenssl, makeClientPki } from "../helpers/client_pki.ts";
import { tlsAttempt } from "../helpers/tls_client.ts";

const opts = {};
const FIX = new URL("../fixtures/tls/", import.meta.url).pathname;
const HAS_OPENSSL = await hasOpenssl();
if (!HAS_OPENSSL) {
  console.warn("WARNING: openssl not found; the Iggy-mode client certificate tests are SKIPPED");
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
        const { client, error } = await tlsAttempt(gw.port, device, { protocolVersion: 5 });
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

        const unknown = await tlsAttempt(gw.port, stranger);
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
