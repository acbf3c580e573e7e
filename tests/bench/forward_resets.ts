/**
 * Forwarding through a reset uplink: a backlog of `--messages` (100-byte payloads, built with
 * build_store.ts) is forwarded to the upstream once straight and once through a proxy that
 * resets every connection every `--every-ms`; prints both rates, their ratio, and what was lost
 * or stored twice (read back through Iggy). Upstream: `IGGY_TEST_ADDRESS` (credentials
 * `IGGY_TEST_USERNAME`/`IGGY_TEST_PASSWORD`, `IGGY_TEST_PROTOCOL`), else the fake Iggy in this
 * process (`--dialect`), whose speed says nothing about Iggy's.
 *
 *   deno run -A tests/bench/forward_resets.ts --messages=1000000 --every-ms=2500
 *
 * @module
 */
import { parseArgs } from "node:util";
import process from "node:process";
import { EmbeddedBackend } from "../../src/log/embedded/mod.ts";
import { openIggy } from "../../src/forward/from_config.ts";
import { readTopic } from "../helpers/iggy_client.ts";
import { buildBacklog } from "./_forward_scenario.ts";
import { Forwarder } from "../../src/forward/forwarder.ts";
import { FORWARD_CONSUMER } from "../../src/forward/lane.ts";
import { ORIGIN_HEADER } from "../../src/forward/origin.ts";
import { Logger } from "../../src/observe/logger.ts";
import { fakeIggyConfig, FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";
import { ROOT } from "./_servers.ts";

const { values: a } = parseArgs({
  args: Deno.args,
  options: {
    messages: { type: "string", default: "1000000" },
    "every-ms": { type: "string", default: "2500" },
    dialect: { type: "string", default: "0.11" },
    batch: { type: "string", default: "5000" },
    pool: { type: "string", default: "2" },
    "skip-cut": { type: "boolean", default: false },
  },
});
const MESSAGES = Number(a.messages);
const AUTH = { patUsername: "", cacheTtlMs: 0 };
const real = Deno.env.get("IGGY_TEST_ADDRESS") ?? "";
const fake = real ? null : new FakeNode({
  dialect: a.dialect === "0.12" ? "0.12" : "0.11",
  store: new FakeStore(),
});
const target = real || fake!.listen();
const iggyConfig = (address: string) =>
  fakeIggyConfig({
    address,
    username: Deno.env.get("IGGY_TEST_USERNAME") ?? "iggy",
    password: Deno.env.get("IGGY_TEST_PASSWORD") ?? "iggy",
    protocol: (Deno.env.get("IGGY_TEST_PROTOCOL") ?? "auto") as "auto",
    request_timeout_ms: 5000,
    pool_size: Number(a.pool),
    batch_max_messages: Number(a.batch),
    batch_max_bytes: 4 << 20,
    reconnect_max_ms: 500,
  });

/**
 * The reset proxy in a process of its own (its ticks on time however busy this one is); counts
 * the connections it reset while `measuring` is set.
 */
async function proxyProcess(to: string, everyMs: number) {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      `${ROOT}tests/bench/reset_proxy_process.ts`,
      `--target=${to}`,
      `--every-ms=${everyMs}`,
    ],
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  const nextLine = async (): Promise<string> => {
    while (!buffered.includes("\n")) {
      const { value, done } = await lines.read();
      if (done) throw new Error("reset proxy ended");
      buffered += value;
    }
    const at = buffered.indexOf("\n");
    const line = buffered.slice(0, at);
    buffered = buffered.slice(at + 1);
    return line;
  };
  const address = await nextLine();
  const state = { measuring: false, resets: 0 };
  const counting = (async () => {
    for (;;) {
      const line = await nextLine().catch(() => null);
      if (line === null) return;
      if (state.measuring) state.resets += Number(line.split(" ")[1]);
    }
  })();
  return {
    address,
    measuring: (on: boolean) => state.measuring = on,
    async stop(): Promise<number> {
      child.kill("SIGKILL");
      await child.status;
      await counting;
      return state.resets;
    },
  };
}

/** Forwards the backlog of a fresh store to `address`; msg/s from start to no lag. */
async function forwardOnce(
  address: string,
  label: string,
  stream: string,
  measuring: (on: boolean) => void = () => {},
): Promise<number> {
  const dir = await Deno.makeTempDir({ prefix: "fwd-resets-" });
  const path = `${dir}/gateway.db`;
  await buildBacklog(path, MESSAGES, stream);
  const local = new EmbeddedBackend({
    path,
    users: [],
    maxStoreBytes: 8 << 30,
    retentionMaxAgeSeconds: 0,
    retentionMaxTopicBytes: 0,
    retentionIntervalMs: 3_600_000,
    maxAppendBatch: 1000,
    writerThread: "in-process",
    forward: { consumer: FORWARD_CONSUMER, whenFull: "refuse" },
  });
  await local.open();
  const fw = new Forwarder(local, () => openIggy(iggyConfig(address), AUTH), {
    gatewayId: label,
    batchMaxMessages: Number(a.batch),
    batchMaxBytes: 4 << 20,
    lingerMs: 20,
    retryMaxMs: 500,
    durableTopics: true,
    upstreamName: address,
  }, new Logger("error"));
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  measuring(true);
  await fw.start();
  // Forwarded = confirmed by a send, or found upstream by a read-back after a cut send.
  while (fw.counters.sent + fw.counters.foundUpstream < MESSAGES || fw.status().lagMessages > 0) {
    await new Promise((r) => setTimeout(r, 20));
  }
  const seconds = (performance.now() - t0) / 1000;
  measuring(false);
  const cpu = process.cpuUsage(cpu0);
  const cpuPct = Math.round((cpu.user + cpu.system) / 1e4 / seconds);
  console.error(`[forward_resets] ${label}: CPU ${cpuPct}%, ${JSON.stringify(fw.counters)}`);
  await fw.stop();
  await local.close();
  await Deno.remove(dir, { recursive: true });
  return MESSAGES / seconds;
}

/** Messages of `stream` upstream: how many distinct origins, how many stored twice. */
async function readBack(stream: string): Promise<{ distinct: number; twice: number }> {
  const iggy = await openIggy(iggyConfig(target), AUTH);
  const seen = new Map<string, number>();
  try {
    for (const m of (await readTopic(iggy, stream, "messages_default")).flat()) {
      const o = m.headers.get(ORIGIN_HEADER) ?? "";
      seen.set(o, (seen.get(o) ?? 0) + 1);
    }
  } finally {
    await iggy.close();
  }
  return { distinct: seen.size, twice: [...seen.values()].filter((n) => n > 1).length };
}

const stamp = Date.now();
const straight = await forwardOnce(target, "straight", `fwd_straight_${stamp}`);
if (a["skip-cut"]) {
  await fake?.close();
  console.log(JSON.stringify({ messages: MESSAGES, straightMsgPerSec: Math.round(straight) }));
  Deno.exit(0);
}
const proxy = await proxyProcess(target, Number(a["every-ms"]));
const cut = await forwardOnce(proxy.address, "cut", `fwd_cut_${stamp}`, proxy.measuring);
const resets = await proxy.stop();
const check = await readBack(`fwd_cut_${stamp}`);
await fake?.close();
console.log(JSON.stringify({
  upstream: real ? `Iggy at ${real}` : `fake Iggy ${a.dialect} (not a figure for Iggy)`,
  messages: MESSAGES,
  straightMsgPerSec: Math.round(straight),
  resetEveryMs: Number(a["every-ms"]),
  resets,
  cutMsgPerSec: Math.round(cut),
  ratio: Number((cut / straight).toFixed(2)),
  lost: MESSAGES - check.distinct,
  storedTwice: check.twice,
}));
