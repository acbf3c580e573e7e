/**
 * Delay from an append to delivery at an MQTT subscriber whose shared reader is caught up, through
 * the real gateway (in process, real sockets) over the fake Iggy (`tests/helpers/fake_iggy/`) in
 * each dialect: 0.12 waits in Iggy with a deferred poll that the append wakes; 0.11 polls on the
 * reader's idle back-off (up to 50 ms). The appends come from outside the gateway (another
 * producer, written straight into the fake), 60 ms apart so the reader is idle each time.
 *
 *   deno run -A tests/bench/long_poll_latency.ts [messages=100]
 *
 * A fake answers at once, so these figures show the client's waiting, not a server's.
 *
 * @module
 */
import mqtt from "mqtt";
import { FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";
import { startGateway } from "../helpers/gateway.ts";
import { median } from "./_stats.ts";

const COUNT = Number(Deno.args[0] ?? 100);
const GAP_MS = 60;
/** The envelope headers the gateway reads (`src/stored/envelope.ts`): an MQTT message from elsewhere. */
const HEADERS = new Map([["mqtt.topic", "sensors/x/data"], ["mqtt.qos", "0"]]);

async function measure(dialect: "0.11" | "0.12"): Promise<number[]> {
  const store = new FakeStore();
  store.createTopic(store.createStream("sensors"), "sensor_data", 1, new Uint8Array(0));
  const node = new FakeNode({ dialect, store });
  const address = node.listen();
  const gw = await startGateway({
    env: {
      IGGY_MQTT_GATEWAY_BACKEND: "iggy",
      IGGY_MQTT_IGGY_ADDRESS: address,
      IGGY_MQTT_IGGY_PROTOCOL: "auto",
      IGGY_MQTT_IGGY_PASSWORD: "iggy",
      IGGY_MQTT_GATEWAY_LOG_LEVEL: Deno.env.get("LOG") ?? "warn",
    },
  });
  const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, { clientId: "lat" });
  const arrivals = new Map<string, number>();
  let wake: (() => void) | undefined;
  client.on("message", (_t, payload) => {
    arrivals.set(new TextDecoder().decode(payload), performance.now());
    wake?.();
  });
  await client.subscribeAsync("sensors/x/data", { qos: 0 }).catch((e) => {
    console.error(gw.logs.slice(-8).join("\n"));
    throw e;
  });
  const delays: number[] = [];
  for (let i = -3; i < COUNT; i++) { // three warm-up messages
    await new Promise((r) => setTimeout(r, GAP_MS));
    const key = `m${i}`;
    const sent = performance.now();
    store.appendExternal("sensors", "sensor_data", 0, new TextEncoder().encode(key), HEADERS);
    while (!arrivals.has(key)) await new Promise<void>((r) => (wake = r));
    if (i >= 0) delays.push(arrivals.get(key)! - sent);
  }
  await client.endAsync();
  await gw.stop();
  await node.close();
  return delays;
}

for (const dialect of ["0.12", "0.11"] as const) {
  const d = await measure(dialect);
  const p90 = [...d].sort((a, b) => a - b)[Math.floor(d.length * 0.9)];
  console.log(
    `protocol ${dialect}: append → subscriber, caught-up reader, ${d.length} messages: ` +
      `median ${median(d).toFixed(2)} ms, p90 ${p90.toFixed(2)} ms, max ${
        Math.max(...d).toFixed(2)
      } ms`,
  );
}
