/**
 * kill -9 of the gateway while it forwards a backlog under live QoS 1 load, five times, on
 * both dialects (the fake Iggy in this process is the upstream; it keeps running): every
 * message the box PUBACKed reaches Iggy, and no message of the box is stored there twice.
 */
import assert from "node:assert/strict";
import { removeStore } from "../helpers/store.ts";
import { freeFixedPort, waitFor } from "../helpers/gateway.ts";
import { publisher, type Tally } from "../helpers/qos1_load.ts";
import { FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";

const DENO = Deno.execPath();
const ROOT = new URL("../../", import.meta.url).pathname;
const ROUNDS = 5;
const CLIENTS = 6;

function startGateway(db: string, port: number, http: number, iggy: string, dialect: string) {
  return new Deno.Command(DENO, {
    args: ["run", "-P=gateway", "main.ts", "run"],
    cwd: ROOT,
    env: {
      IGGY_MQTT_LISTENERS_TCP: `127.0.0.1:${port}`,
      IGGY_MQTT_LISTENERS_HTTP: `127.0.0.1:${http}`,
      IGGY_MQTT_EMBEDDED_PATH: db,
      IGGY_MQTT_GATEWAY_LOG_LEVEL: "error",
      IGGY_MQTT_LIMITS_MAX_CONNECTION_RATE_PER_SOURCE: "0",
      IGGY_MQTT_FORWARD_ENABLED: "true",
      IGGY_MQTT_FORWARD_BATCH_MAX_MESSAGES: "300",
      IGGY_MQTT_IGGY_ADDRESS: iggy,
      IGGY_MQTT_IGGY_PROTOCOL: dialect,
      IGGY_MQTT_IGGY_PASSWORD: "iggy",
      IGGY_MQTT_IGGY_RECONNECT_MAX_MS: "200",
    },
    stdout: "null",
    stderr: "null",
  }).spawn();
}

async function listening(port: number): Promise<boolean> {
  try {
    (await Deno.connect({ hostname: "127.0.0.1", port })).close();
    return true;
  } catch {
    return false;
  }
}

/** Payload → how many times it is stored upstream, over every partition of the topic. */
function upstreamPayloads(store: FakeStore): Map<string, number> {
  const found = new Map<string, number>();
  const partitions = store.topic("sensors", "messages_default")?.partitions ?? [];
  for (const p of partitions) {
    for (const payload of store.payloads("sensors", "messages_default", p.id)) {
      found.set(payload, (found.get(payload) ?? 0) + 1);
    }
  }
  return found;
}

for (const dialect of ["0.11", "0.12"] as const) {
  Deno.test(`forward ${dialect}: ${ROUNDS} kill -9 of the gateway while forwarding: every PUBACKed message upstream, once`, async () => {
    await Deno.mkdir(`${ROOT}data`, { recursive: true });
    const db = `data/forward-kill-${crypto.randomUUID()}.db`;
    const port = freeFixedPort();
    let http = freeFixedPort();
    while (http === port) http = freeFixedPort();
    const store = new FakeStore();
    const node = new FakeNode({ dialect, store });
    const iggy = node.listen();
    const tally: Tally = { sent: 0, acked: new Set() };
    const seqs = Array.from({ length: CLIENTS }, () => ({ n: 0 }));
    try {
      for (let round = 0; round <= ROUNDS; round++) {
        const child = startGateway(db, port, http, iggy, dialect);
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
      const found = upstreamPayloads(store);
      const lost = [...tally.acked].filter((p) => !found.has(p));
      const duplicates = [...found.values()].filter((n) => n > 1).length;
      console.log(
        `forward kill ${dialect}: acked=${tally.acked.size} upstream=${found.size} lost=${lost.length} duplicates=${duplicates}`,
      );
      assert.ok(tally.acked.size > 1000, `only ${tally.acked.size} acknowledged`);
      assert.equal(lost.length, 0, `lost acknowledged messages: ${lost.slice(0, 5)}`);
      assert.equal(duplicates, 0, "no message of the box twice upstream");
    } finally {
      await node.close();
      await removeStore(`${ROOT}${db}`);
    }
  });
}
