/**
 * The gateway in Iggy mode over the fake Iggy on real sockets, `iggy.protocol = "auto"`, in both
 * dialects: the start-up log line, `/ready` and `/status.json` name the server and the dialect,
 * and an MQTT publish reaches an MQTT subscriber (QoS 1) through the log.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";
import { startGateway } from "../helpers/gateway.ts";

const opts = {};

for (
  const [dialect, phrase] of [
    ["0.12", "Iggy server 0.10.0-fake, binary protocol 0.12.2 (dialect 0.12, iggy.protocol auto)"],
    ["0.11", "Iggy server 0.9.0-fake, binary protocol 0.11.0 (dialect 0.11, iggy.protocol auto)"],
  ] as const
) {
  Deno.test(
    `gateway on fake Iggy ${dialect}: log, /ready and status name the dialect; publish reaches a subscriber`,
    opts,
    async () => {
      const store = new FakeStore();
      const node = new FakeNode({ dialect, store });
      const gw = await startGateway({
        env: {
          IGGY_MQTT_GATEWAY_BACKEND: "iggy",
          IGGY_MQTT_IGGY_ADDRESS: node.listen(),
          IGGY_MQTT_IGGY_PASSWORD: "iggy",
        },
      });
      try {
        const started = gw.logs.map((l) => JSON.parse(l)).find((l) => l.msg === "Gateway started");
        assert.equal(started.backend_detail, phrase);
        const ready = await (await fetch(`http://127.0.0.1:${gw.httpPort}/ready`)).json();
        assert.equal(ready.backend, phrase);
        const status = await (await fetch(`http://127.0.0.1:${gw.httpPort}/status.json`)).json();
        assert.equal(status.gateway.backend_detail, phrase);

        const sub = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, { clientId: "sub" });
        const got = new Promise<string>((r) => sub.on("message", (_t, p) => r(p.toString())));
        await sub.subscribeAsync("sensors/a/data", { qos: 1 });
        const pub = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, { clientId: "pub" });
        await pub.publishAsync("sensors/a/data", "hello over " + dialect, { qos: 1 });
        assert.equal(await got, "hello over " + dialect);
        await pub.endAsync();
        await sub.endAsync();
        const stored = [...store.streams.get("sensors")!.topics.get("sensor_data")!.partitions]
          .flatMap((p) => store.payloads("sensors", "sensor_data", p.id));
        assert.deepEqual(stored, ["hello over " + dialect]);
      } finally {
        await gw.stop();
        await node.close();
      }
    },
  );
}
