/**
 * The gateway in Iggy mode over the fake Iggy, both dialects, with the default
 * `limits.max_packet_bytes` (1 MiB): a backlog of 70 messages of 1 MiB (more than one Iggy frame
 * holds) is replayed to a `$replay` subscription whole and in order. A poll asks for as many
 * messages as fit one frame (`frame_reader.ts` `maxPollMessages`): asked for 512, the reply
 * passed the frame bound and the poll failed on every try.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import mqtt from "mqtt";
import { FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";
import { startGateway, waitFor } from "../helpers/gateway.ts";
import { maxPollMessages } from "../../src/log/iggy/frame_reader.ts";

const opts = {};
const MIB = 1024 * 1024;

Deno.test("maxPollMessages() keeps a poll of the largest messages within one frame, and 512 small ones", () => {
  assert.equal(maxPollMessages(MIB), 47);
  assert.ok(maxPollMessages(8092) >= 512);
  assert.equal(maxPollMessages(268_435_455), 1);
  assert.equal(maxPollMessages(undefined), Infinity);
});

for (const dialect of ["0.12", "0.11"] as const) {
  Deno.test({
    name:
      `fake Iggy ${dialect}, default config: 70 messages of 1 MiB (over one frame) replay whole and in order`,
    ...opts,
    async fn() {
      const store = new FakeStore();
      const node = new FakeNode({ dialect, store });
      const gw = await startGateway({
        env: {
          IGGY_MQTT_GATEWAY_BACKEND: "iggy",
          IGGY_MQTT_IGGY_ADDRESS: node.listen(),
          IGGY_MQTT_IGGY_PASSWORD: "iggy",
        },
      });
      const url = `mqtt://127.0.0.1:${gw.port}`;
      const clients: mqtt.MqttClient[] = [];
      try {
        const pub = await mqtt.connectAsync(url, { clientId: "pub", reconnectPeriod: 0 });
        clients.push(pub);
        const fill = (i: number) => Buffer.alloc(MIB - 64, i);
        for (let i = 0; i < 70; i++) await pub.publishAsync("sensors/a/data", fill(i), { qos: 1 });
        const sub = await mqtt.connectAsync(url, { clientId: "sub", reconnectPeriod: 0 });
        clients.push(sub);
        const got: Buffer[] = [];
        sub.on("message", (_t, p) => got.push(p));
        await sub.subscribeAsync("$replay/earliest/sensors/a/data", { qos: 1 });
        await waitFor(() => got.length === 70, 30_000, `70 replayed (${got.length})`);
        assert.ok(got.every((p, i) => p.length === MIB - 64 && p[0] === i && p[MIB - 65] === i));
        assert.equal(gw.view.metrics.evictions.get(), 0);
        assert.ok(!gw.logs.some((l) => l.includes("poll failed")), "no poll failed");
      } finally {
        for (const c of clients) await c.endAsync();
        await gw.stop();
        await node.close();
      }
    },
  });
}
