/**
 * kill -9 of the gateway while it forwards a backlog under live QoS 1 load, five times, on
 * both dialects (the fake Iggy in this process is the upstream; it keeps running), and against
 * the real Iggy at `IGGY_TEST_ADDRESS` when set: every message the box PUBACKed reaches Iggy,
 * and no message of the box is stored there twice.
 */
import assert from "node:assert/strict";
import { removeStore } from "../helpers/store.ts";
import { freeFixedPort, waitFor } from "../helpers/gateway.ts";
import { publisher, type Tally } from "../helpers/qos1_load.ts";
import { FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";
import { iggyClient, readTopic } from "../helpers/iggy_client.ts";
import { listening } from "../helpers/iggy_server.ts";

const DENO = Deno.execPath();
const ROOT = new URL("../../", import.meta.url).pathname;
const ROUNDS = 5;
const CLIENTS = 6;

const REAL_IGGY = Deno.env.get("IGGY_TEST_ADDRESS") ?? "";
if (REAL_IGGY === "") {
  console.warn("WARNING: IGGY_TEST_ADDRESS is not set; forward kill -9 against Iggy is SKIPPED.");
}

function startGateway(
  db: string,
  port: number,
  http: number,
  iggy: string,
  dialect: string,
  mapFile: string,
) {
  return new Deno.Command(DENO, {
    args: ["run", "-P=gateway", "main.ts", "run"],
    cwd: ROOT,
    env: {
      IGGY_MQTT_LISTENERS_TCP: `127.0.0.1:${port}`,
      IGGY_MQTT_LISTENERS_HTTP: `127.0.0.1:${http}`,
      IGGY_MQTT_LISTENERS_WS: "", // the quick start config binds 8083
      IGGY_MQTT_EMBEDDED_PATH: db,
      IGGY_MQTT_GATEWAY_LOG_LEVEL: "error",
      IGGY_MQTT_LIMITS_MAX_CONNECTION_RATE_PER_SOURCE: "0",
      IGGY_MQTT_FORWARD_ENABLED: "true",
      IGGY_MQTT_FORWARD_BATCH_MAX_MESSAGES: "300",
      IGGY_MQTT_IGGY_ADDRESS: iggy,
      IGGY_MQTT_IGGY_PROTOCOL: dialect,
      IGGY_MQTT_IGGY_PASSWORD: "iggy",
      IGGY_MQTT_IGGY_RECONNECT_MAX_MS: "200",
      IGGY_MQTT_MAPPING_MAP_FILE: mapFile,
    },
    stdout: "null",
    stderr: "null",
  }).spawn();
}

/** Payload → how many times it is stored in `stream`/messages, read through our Iggy client. */
async function upstreamPayloads(address: string, stream: string): Promise<Map<string, number>> {
  const iggy = iggyClient(address, "iggy", "iggy");
  await iggy.open();
  const found = new Map<string, number>();
  try {
    for (const m of (await readTopic(iggy, stream, "messages")).flat()) {
      const payload = new TextDecoder().decode(m.payload);
      found.set(payload, (found.get(payload) ?? 0) + 1);
    }
  } finally {
    await iggy.close();
  }
  return found;
}

const TARGETS = [
  { name: "fake 0.11", dialect: "0.11", real: false },
  { name: "fake 0.12", dialect: "0.12", real: false },
  { name: `Iggy at ${REAL_IGGY}`, dialect: "auto", real: true },
] as const;

for (const { name, dialect, real } of TARGETS) {
  Deno.test({
    name:
      `forward to ${name}: ${ROUNDS} kill -9 of the gateway while forwarding: every PUBACKed message upstream, once`,
    ignore: real && REAL_IGGY === "",
    fn: () => killRounds(dialect, real),
  });
}

async function killRounds(dialect: string, real: boolean): Promise<void> {
  await Deno.mkdir(`${ROOT}data`, { recursive: true });
  const id = crypto.randomUUID();
  const db = `data/forward-kill-${id}.db`;
  const stream = `fwd_kill_${id.slice(0, 8)}`;
  const mapFile = `data/forward-kill-${id}.toml`;
  await Deno.writeTextFile(
    `${ROOT}${mapFile}`,
    `default_stream = "${stream}"\ndefault_topic = "messages"\n`,
  );
  const port = freeFixedPort();
  let http = freeFixedPort();
  while (http === port) http = freeFixedPort();
  const node = real
    ? null
    : new FakeNode({ dialect: dialect === "0.12" ? "0.12" : "0.11", store: new FakeStore() });
  const iggy = node?.listen() ?? REAL_IGGY;
  const tally: Tally = { sent: 0, acked: new Set() };
  const seqs = Array.from({ length: CLIENTS }, () => ({ n: 0 }));
  try {
    for (let round = 0; round <= ROUNDS; round++) {
      const child = startGateway(db, port, http, iggy, dialect, mapFile);
      await waitFor(() => listening(port), 60_000, "gateway to listen");
      if (round === ROUNDS) {
        // The last start is not killed: it drains what is left, then stops.
        await waitFor(
          async () => {
            const r = await fetch(`http://127.0.0.1:${http}/ready`).catch(() => null);
            return /nothing waiting/.test(r ? (await r.json()).uplink ?? "" : "");
          },
          30_000,
          "the backlog forwarded",
        );
        child.kill("SIGTERM");
        await child.status;
        break;
      }
      const clients = seqs.map((s, i) =>
        publisher(port, `fwd-kill-${i}`, "fwd/kill/topic", tally, s)
      );
      await new Promise((r) => setTimeout(r, 400 + Math.random() * 1200));
      child.kill("SIGKILL");
      await child.status;
      await Promise.all(clients);
    }
    const found = await upstreamPayloads(iggy, stream);
    const lost = [...tally.acked].filter((p) => !found.has(p));
    const duplicates = [...found.values()].filter((n) => n > 1).length;
    console.log(
      `forward kill ${
        real ? "Iggy" : dialect
      }: acked=${tally.acked.size} upstream=${found.size} lost=${lost.length} duplicates=${duplicates}`,
    );
    assert.ok(tally.acked.size > 1000, `only ${tally.acked.size} acknowledged`);
    assert.equal(lost.length, 0, `lost acknowledged messages: ${lost.slice(0, 5)}`);
    assert.equal(duplicates, 0, "no message of the box twice upstream");
  } finally {
    await node?.close();
    await removeStore(`${ROOT}${db}`);
    await Deno.remove(`${ROOT}${mapFile}`).catch(() => {});
  }
}
