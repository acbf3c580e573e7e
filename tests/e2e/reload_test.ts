/**
 * SIGHUP reload as an operator does it: edit the topic map, `kill -HUP`, and new publishes
 * follow the new rule without any client being disconnected; subscriptions follow too.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { openStoreReadOnly, removeStore } from "../helpers/store.ts";
import { freeFixedPort, waitFor } from "../helpers/gateway.ts";

const DENO = Deno.execPath();
const ROOT = new URL("../../", import.meta.url).pathname;

const MAP_V1 = `default_stream = "sensors"\ndefault_topic = "messages_default"\n`;
const MAP_V2 = `default_stream = "sensors"\ndefault_topic = "messages_default"\n
[[rule]]
mqtt_topic = 'plant/([^/]+)/line/(\\d+)'
stream = 'plant_$1'
topic = 'lines'
partition_key = 'line_$2'
`;

async function storedTopics(db: string, stream: string, topic: string): Promise<string[]> {
  const store = await openStoreReadOnly(db);
  try {
    const info = await store.getTopic(stream, topic);
    if (!info) return [];
    const out: string[] = [];
    for (let p = 0; p < info.partitions; p++) {
      for (const m of await store.poll({ stream, topic, partition: p }, 0, 100)) {
        out.push(new TextDecoder().decode(m.payload));
      }
    }
    return out.sort();
  } finally {
    await store.close();
  }
}

Deno.test({
  name:
    "SIGHUP: a changed topic map applies to new publishes and subscriptions without disconnecting anyone; a bad map is refused",
  async fn() {
    await Deno.mkdir(`${ROOT}data`, { recursive: true });
    const id = crypto.randomUUID();
    const mapFile = `config/.test-reload-map-${id}.toml`;
    const configFile = `config/.test-reload-${id}.toml`;
    const db = `data/reload-${id}.db`;
    const port = freeFixedPort();
    await Deno.writeTextFile(`${ROOT}${mapFile}`, MAP_V1);
    await Deno.writeTextFile(
      `${ROOT}${configFile}`,
      `[listeners]\ntcp = "127.0.0.1:${port}"\nhttp = ""\n[auth]\nallow_anonymous = true\n` +
        `[log]\nauto_create = true\n[mapping]\nmap_file = "${mapFile}"\n[embedded]\npath = "${db}"\n`,
    );
    const child = new Deno.Command(DENO, {
      args: ["run", "-P=gateway", "main.ts", "run", "--config", configFile],
      cwd: ROOT,
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const out: string[] = [];
    (async () => {
      for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) out.push(chunk);
    })();
    const closes: string[] = [];
    let pub: mqtt.MqttClient | null = null;
    let sub: mqtt.MqttClient | null = null;
    try {
      await waitFor(() => out.join("").includes("Gateway started"), 60_000, "gateway start");
      pub = await mqtt.connectAsync(`mqtt://127.0.0.1:${port}`, {
        clientId: "pub",
        reconnectPeriod: 0,
      });
      sub = await mqtt.connectAsync(`mqtt://127.0.0.1:${port}`, {
        clientId: "sub",
        reconnectPeriod: 0,
      });
      pub.on("close", () => closes.push("pub"));
      sub.on("close", () => closes.push("sub"));
      const received: string[] = [];
      sub.on("message", (_t, payload) => received.push(payload.toString()));
      await sub.subscribeAsync("plant/a/line/7", { qos: 1 });
      await pub.publishAsync("plant/a/line/7", "before", { qos: 1 });
      await waitFor(() => received.includes("before"), 5000, "delivery before reload");

      // Operator edits the map and sends SIGHUP.
      await Deno.writeTextFile(`${ROOT}${mapFile}`, MAP_V2);
      child.kill("SIGHUP");
      await waitFor(
        () => out.join("").includes("Configuration reloaded"),
        10_000,
        "reload log line",
      );
      await pub.publishAsync("plant/a/line/7", "after", { qos: 1 });
      await waitFor(() => received.includes("after"), 5000, "delivery after reload");

      // A broken map is refused; the previous one stays in force.
      await Deno.writeTextFile(`${ROOT}${mapFile}`, `[[rule]]\nmqtt_topic = '('\n`);
      child.kill("SIGHUP");
      await waitFor(() => out.join("").includes("Reload refused"), 10_000, "refusal log line");
      await pub.publishAsync("plant/a/line/7", "still-v2", { qos: 1 });
      await waitFor(() => received.includes("still-v2"), 5000, "delivery after refused reload");

      assert.deepEqual(closes, [], "no client was disconnected");
      assert.deepEqual(await storedTopics(`${ROOT}${db}`, "sensors", "messages_default"), [
        "before",
      ]);
      assert.deepEqual(await storedTopics(`${ROOT}${db}`, "plant_a", "lines"), [
        "after",
        "still-v2",
      ]);
    } finally {
      await pub?.endAsync();
      await sub?.endAsync();
      child.kill("SIGTERM");
      await child.status;
      await child.stderr.cancel().catch(() => {});
      for (const f of [mapFile, configFile]) await Deno.remove(`${ROOT}${f}`).catch(() => {});
      await removeStore(`${ROOT}${db}`);
    }
  },
});
