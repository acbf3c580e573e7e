/**
 * A store filled during an outage is ready again as soon as it has room, not after the next
 * publish (a load balancer that gates on `/ready` never sends that publish): in the backend,
 * within 2 s of the forwarded position freeing room (and at once when retention by age does); in a gateway whose Iggy (the fake, both
 * dialects) stops mid-run under QoS 1 load, with one `Uplink down` and one `Uplink up` in the
 * log and `/status.json` fields that follow the backlog.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { FORWARD_CONSUMER } from "../../src/forward/lane.ts";
import { openTestStore, sizedMessage } from "../helpers/embedded_store.ts";
import { FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";
import { freePort, startGateway, waitFor } from "../helpers/gateway.ts";

Deno.test("a full forward store is ready within 2 s of the forwarded position freeing room, with no append", async () => {
  await using store = await openTestStore({
    maxStoreBytes: 1024 * 1024,
    forward: { consumer: FORWARD_CONSUMER, whenFull: "refuse" },
  });
  const b = store.backend;
  await b.createTopic("plant", "readings", { partitions: 1 });
  const address = { stream: "plant", topic: "readings", partition: 0 };
  let appended = 0;
  for (;;) {
    const outcome = await b.append({ ...address, messages: [sizedMessage(4000)] })
      .then(() => "ok", (e) => e.code);
    if (outcome !== "ok") {
      assert.equal(outcome, "full");
      break;
    }
    assert.ok(++appended < 10_000, "the store never filled");
  }
  assert.equal(b.health().ready, false);
  assert.match(b.health().reason!, /is full/);
  // The forwarder confirmed everything: its stored position is what frees room.
  await b.storeOffset(FORWARD_CONSUMER, address, appended - 1);
  const roomAt = Date.now();
  await waitFor(() => b.health().ready, 2_000, "ready within 2 s");
  assert.ok(Date.now() - roomAt < 2_000);
  assert.equal(await b.nextOffset(address), appended, "no append in between");
  await b.append({ ...address, messages: [sizedMessage(4000)] });
});

Deno.test("a full store without forwarding is ready once retention by age frees room, with no append", async () => {
  await using store = await openTestStore({
    maxStoreBytes: 1024 * 1024,
    retentionMaxAgeSeconds: 60,
  });
  const b = store.backend;
  await b.createTopic("plant", "readings", { partitions: 1 });
  const address = { stream: "plant", topic: "readings", partition: 0 };
  let appended = 0;
  while (
    await b.append({ ...address, messages: [sizedMessage(4000)] }).then(() => true, () => false)
  ) {
    assert.ok(++appended < 10_000, "the store never filled");
  }
  assert.equal(b.health().ready, false);
  const { deleted } = await b.runRetention(Date.now() * 1000 + 120 * 1_000_000);
  assert.ok(deleted > 0);
  assert.equal(b.health().ready, true, b.health().reason ?? "");
  assert.equal(await b.nextOffset(address), appended, "no append in between");
});

/** Publishes `n` at QoS 1 with a 4 KB payload; the PUBACK's reason code (0 = accepted). */
async function publish(c: mqtt.MqttClient, n: number): Promise<number> {
  try {
    await c.publishAsync("sensors/s1/data", `${n}:${"x".repeat(4000)}`, { qos: 1 });
    return 0;
  } catch (e) {
    return (e as { code?: number }).code ?? -1;
  }
}

async function getJson(port: number, path: string) {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, body: await res.json() };
}

for (const dialect of ["0.11", "0.12"] as const) {
  Deno.test(`forward ${dialect}: Iggy stopped mid-run under QoS 1 load: one down, one up, ready again with no publish`, async () => {
    const port = freePort();
    const upstream = new FakeStore();
    let node = new FakeNode({ dialect, store: upstream });
    node.listen(port);
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
    const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
      protocolVersion: 5,
      clientId: "filler",
      reconnectPeriod: 0,
    });
    const named = (msg: string) => gw.logs.map((l) => JSON.parse(l)).filter((l) => l.msg === msg);
    try {
      let n = 0;
      for (; n < 50; n++) assert.equal(await publish(c, n), 0);
      await waitFor(() => gw.view.uplink!.fields().up, 10_000, "uplink up");
      await node.close(); // Iggy stops mid-run
      let refused = 0;
      for (; n < 2_000 && refused === 0; n++) refused = await publish(c, n);
      assert.equal(refused, 0x97, `the store filled during the outage (at ${n})`);
      // A send under way when Iggy went may wait for it a while: the lag is looked at each second.
      await waitFor(
        async () => (await getJson(gw.httpPort, "/status.json")).body.uplink.waiting_messages > 100,
        5_000,
        "status.json to show the backlog",
      );
      const during = (await getJson(gw.httpPort, "/status.json")).body;
      assert.equal(during.uplink.up, false);
      assert.ok(during.uplink.waiting_bytes > during.uplink.waiting_messages * 4000);
      assert.ok(during.uplink.reason.length > 0);
      assert.equal((await getJson(gw.httpPort, "/ready")).status, 503);
      const published = during.publishes_total;
      node = new FakeNode({ dialect, store: upstream });
      node.listen(port);
      await waitFor(
        async () => (await getJson(gw.httpPort, "/ready")).status === 200,
        20_000,
        "/ready 200 with no publish",
      );
      const after = (await getJson(gw.httpPort, "/status.json")).body;
      assert.deepEqual(after.publishes_total, published, "no publish since the outage");
      await waitFor(() => named("Uplink up").length > 0, 20_000, "'Uplink up'");
      assert.equal(named("Uplink down").length, 1);
      assert.equal(named("Uplink up").length, 1);
      assert.ok(named("Uplink down")[0].waiting_messages >= 0);
      assert.ok(named("Uplink up")[0].waited_bytes > 100 * 4000);
    } finally {
      await c.endAsync();
      await gw.stop();
      await node.close().catch(() => {}); // closed already when the test failed during the outage
    }
  });
}
