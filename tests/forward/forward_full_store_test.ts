/**
 * Forward mode at the local disk bound, seen from devices: with the uplink down and
 * `forward.when_full = "refuse"`, QoS 1 publishes are PUBACKed until the store is full, then
 * refused (MQTT 5: PUBACK 0x97); once the uplink is up and the backlog forwarded, they are
 * PUBACKed again, and every message that was acknowledged is in Iggy (the fake, both dialects).
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";
import { freeFixedPort, startGateway, waitFor } from "../helpers/gateway.ts";

/** Payloads stored upstream in sensors/sensor_data, over every partition. */
function upstreamPayloads(store: FakeStore): Set<string> {
  const out = new Set<string>();
  const t = store.topic("sensors", "sensor_data");
  for (const p of t?.partitions ?? []) {
    for (const payload of store.payloads("sensors", "sensor_data", p.id)) out.add(payload);
  }
  return out;
}

/** Publishes `<n>:` + filler at QoS 1; the PUBACK's reason code (0 = accepted). */
async function publish(c: mqtt.MqttClient, n: number): Promise<number> {
  const payload = `${n}:${"x".repeat(4000)}`;
  try {
    // MQTT.js rejects a PUBACK with a reason code of 0x80 or more, the code on the error.
    await c.publishAsync("sensors/s1/data", payload, { qos: 1 });
    return 0;
  } catch (e) {
    return (e as { code?: number }).code ?? -1;
  }
}

for (const dialect of ["0.11", "0.12"] as const) {
  Deno.test(`forward ${dialect}: refuse at the disk bound (MQTT 5: 0x97), accept again once forwarded`, async () => {
    // The uplink's port, listened on only later: below the ephemeral range, so no outgoing
    // socket (another test's, or the gateway's own reconnects connecting to themselves) takes it
    // meanwhile, as one from freePort() could.
    const port = freeFixedPort();
    const gw = await startGateway({
      env: {
        IGGY_MQTT_FORWARD_ENABLED: "true",
        IGGY_MQTT_FORWARD_LINGER_MS: "5",
        IGGY_MQTT_EMBEDDED_MAX_STORE_BYTES: String(1024 * 1024),
        IGGY_MQTT_LIMITS_MAX_PACKET_BYTES: "8000",
        IGGY_MQTT_IGGY_ADDRESS: `127.0.0.1:${port}`,
        IGGY_MQTT_IGGY_PROTOCOL: dialect,
        IGGY_MQTT_IGGY_PASSWORD: "iggy",
        IGGY_MQTT_IGGY_RECONNECT_MAX_MS: "100",
      },
    });
    const node = new FakeNode({ dialect, store: new FakeStore() });
    const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
      protocolVersion: 5,
      clientId: "filler",
      reconnectPeriod: 0,
    });
    try {
      const acked: string[] = [];
      let refused = -1;
      for (let n = 0; n < 1000; n++) {
        const code = await publish(c, n);
        if (code !== 0) {
          refused = code;
          break;
        }
        acked.push(`${n}:`);
      }
      assert.equal(refused, 0x97, "MQTT 5 PUBACK 0x97 (quota exceeded) at the bound");
      assert.ok(acked.length > 100, `${acked.length} acknowledged before the bound`);
      node.listen(port);
      let n = 1000;
      await waitFor(async () => await publish(c, n++) === 0, 20_000, "PUBACKs again");
      await waitFor(() => gw.view.forwarder!.status().lagMessages === 0, 10_000, "drained");
      const upstream = [...upstreamPayloads(node.o.store)].map((p) =>
        p.slice(0, p.indexOf(":") + 1)
      );
      const there = new Set(upstream);
      const lost = acked.filter((p) => !there.has(p));
      assert.equal(lost.length, 0, `acknowledged but not upstream: ${lost.slice(0, 5)}`);
    } finally {
      await c.endAsync();
      await gw.stop();
      await node.close();
    }
  });
}
