/**
 * The "retained" scenario: what 10,000 retained topics cost. On one store it starts the gateway
 * empty (twice: the lower start-to-ready and RSS count), sets 10,000 retained messages (topics
 * `fleet/<i>/state`, 32-byte payloads, QoS 1, from 10 clients), checks that a new `#`
 * subscriber receives all 10,000 flagged RETAIN, then starts the gateway on the store again
 * (twice). Figures: the start-up the retained set adds, the RSS it adds per message beyond the
 * payload, and the heap it takes per message beyond the payload measured apart
 * (`retained_memory.ts`: the set loaded from the same store in a process of its own, with a
 * garbage collection before each reading).
 *
 * @module
 */
import mqtt from "mqtt";
import { gatewayServer, type LaunchOptions, ROOT, type Running } from "./_servers.ts";
import { rssOn } from "./_store_scenario.ts";

const PAYLOAD = new Uint8Array(32).fill(0x61);

/** Sets `count` retained messages from 10 clients, QoS 1, 100 in flight each. */
async function setRetained(s: Running, count: number): Promise<void> {
  const clients = await Promise.all(
    Array.from(
      { length: 10 },
      () => mqtt.connectAsync(`mqtt://127.0.0.1:${s.port}`, { reconnectPeriod: 0 }),
    ),
  );
  await Promise.all(clients.map(async (c, k) => {
    for (let i = k; i < count; i += 10 * 100) {
      const batch = [];
      for (let j = i; j < Math.min(count, i + 10 * 100); j += 10) {
        batch.push(
          c.publishAsync(`fleet/${j}/state`, Buffer.from(PAYLOAD), { qos: 1, retain: true }),
        );
      }
      await Promise.all(batch);
    }
  }));
  await Promise.all(clients.map((c) => c.endAsync()));
}

/** Retained messages a new `#` subscriber receives within `timeoutMs`. */
async function receiveAll(s: Running, count: number, timeoutMs: number): Promise<number> {
  let got = 0;
  const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${s.port}`, { reconnectPeriod: 0 });
  c.on("message", (_t, _p, packet) => {
    if (packet.retain) got++;
  });
  await c.subscribeAsync("#", { qos: 1 });
  const deadline = Date.now() + timeoutMs;
  while (got < count && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  await c.endAsync();
  return got;
}

/** Heap per retained message beyond its payload, measured by retained_memory.ts. */
async function heapPerMessage(path: string): Promise<number> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--v8-flags=--expose-gc", `${ROOT}tests/bench/retained_memory.ts`, path],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) {
    throw new Error(
      `retained_memory.ts failed: ${new TextDecoder().decode(out.stderr).slice(-800)}`,
    );
  }
  return JSON.parse(new TextDecoder().decode(out.stdout).trim().split("\n").at(-1)!)
    .bytesPerMessage;
}

/** Runs the scenario in `dataDir` (relative to the repository, inside the gateway's ./data). */
export async function retainedScenario(
  dataDir: string,
  flags: string[],
  launch: LaunchOptions,
  smoke: boolean,
) {
  const count = smoke ? 500 : 10_000;
  const path = `${dataDir}/retained/gateway.db`;
  await Deno.mkdir(`${ROOT}${dataDir}/retained`, { recursive: true });
  const empty = await rssOn(path, dataDir, flags, launch);
  const s = await gatewayServer(dataDir, flags, "gateway", { IGGY_MQTT_EMBEDDED_PATH: path })
    .start(launch);
  let received = 0;
  try {
    await setRetained(s, count);
    received = await receiveAll(s, count, 30_000);
  } finally {
    await s.stop();
  }
  const full = await rssOn(path, dataDir, flags, launch);
  return {
    retainedTopics: count,
    receivedBySubscriber: received,
    readyEmptyMs: empty.readyMs,
    readyRetainedMs: full.readyMs,
    startExtraMs: full.readyMs - empty.readyMs,
    rssPerMessageBytes: (full.rss - empty.rss) * 1024 * 1024 / count - PAYLOAD.length,
    heapPerMessageBytes: await heapPerMessage(`${ROOT}${path}`) - PAYLOAD.length,
  };
}
