/**
 * `deno task bench`: runs every scenario of the benchmark against the gateway (as `deno task
 * start` runs it, on node:net; and as `deno task start:epoll` does, on the epoll socket layer),
 * mosquitto and aedes in one run, and prints a table of figures with the ratio gateway/peer
 * measured in the same run and each server's CPU%. JSON goes to tests/bench/results/latest.json.
 *
 *   deno task bench                 full run (each scenario 2 s warm-up + 10 s measured)
 *   deno task bench --smoke         ~1 s per scenario, tiny counts; checks only that every
 *                                   scenario produced figures, exits 1 when one did not
 *   --servers=gateway,mosquitto     subset of gateway, gateway-epoll, mosquitto, aedes; or
 *                                   deno-floor (floor_server.ts: what Deno itself costs a
 *                                   durable server; only the scenarios it lists)
 *   --scenarios=qos1,qos0_10        subset of scenarios
 *                                   ("store": the gateway's RSS on a small and a large store,
 *                                   see _store_scenario.ts; "forward": forward mode's backlog
 *                                   drain and live QoS 1 with and without it, see
 *                                   _forward_scenario.ts; "retained": 10,000 retained topics:
 *                                   start-up, memory and delivery, see _retained_scenario.ts;
 *                                   "ws": MQTT over WebSocket against TCP, idle memory and
 *                                   QoS 1 ingest, see _ws_scenario.ts; "catch_up": a
 *                                   stored session's backlog of 100 B, 2 KB and 200 KB
 *                                   messages, msg/s and MB/s, see _catch_up_scenario.ts;
 *                                   run only when named)
 *   --no-priority                   no own autogroup at nice -10 (see _servers.ts)
 *   --gateway-deno-flags="--cpu-prof --cpu-prof-dir=/tmp/prof"   extra flags for the gateway
 *   --backend=iggy                  QoS 0 and QoS 1 through a real Iggy server (IGGY_TEST_ADDRESS,
 *                                   IGGY_TEST_USERNAME/PASSWORD) beside the embedded log, for
 *                                   fsync-enforced and server-default topics; says it skipped
 *                                   when IGGY_TEST_ADDRESS is unset
 *
 * All servers run at once, each pinned to core 0 (idle when not under test); the load
 * generator runs in its own process pinned to core 1. Scenarios go one at a time, each against
 * all servers back to back, so the compared figures are measured minutes apart at most.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { dirname } from "node:path";
import {
  aedesServer,
  floorServer,
  gatewayServer,
  has,
  launchArgv,
  type LaunchOptions,
  mosquittoServer,
  reapOnSignal,
  ROOT,
  type Running,
  type ServerDef,
} from "./_servers.ts";
import { figureRows, FIGURES, machine, renderTable } from "./_report.ts";
import { cpuPercent, cpuTicks, median, rssBytes } from "./_stats.ts";
import {
  IGGY_FIGURES,
  IGGY_VARIANTS,
  iggyGateways,
  renderIggyTable,
  scrapeSends,
  sendFigures,
} from "./_iggy.ts";
import { storeScenario } from "./_store_scenario.ts";
import { forwardScenario } from "./_forward_scenario.ts";
import { retainedScenario } from "./_retained_scenario.ts";
import { wsScenario } from "./_ws_scenario.ts";
import { catchUpScenario } from "./_catch_up_scenario.ts";

const { values: a } = parseArgs({
  args: Deno.args,
  options: {
    smoke: { type: "boolean", default: false },
    servers: { type: "string", default: "gateway,gateway-epoll,mosquitto,aedes" },
    scenarios: { type: "string", default: "" },
    "no-priority": { type: "boolean", default: false },
    "gateway-deno-flags": { type: "string", default: "" },
    backend: { type: "string", default: "embedded" },
    out: { type: "string", default: `${ROOT}tests/bench/results/latest.json` },
  },
});
const SMOKE = a.smoke;
/** Pairs of live runs, without and with forwarding, in the forward scenario (full mode). */
const FORWARD_ROUNDS = 3;
const WARMUP_MS = SMOKE ? 200 : 2000;
const DURATION_MS = SMOKE ? 1000 : 10_000;

/**
 * The fleet scenario's arguments (`_raw_fleet.ts`); small in smoke mode. Its warm-up is one whole
 * interval: a fleet's steady state is devices whose topics the server has seen, and with the
 * common 2 s warm-up 80% of the measured readings were a topic's first.
 */
function fleet(qos: 0 | 1): string[] {
  const intervalMs = SMOKE ? 1000 : 10_000;
  return [
    "--scenario=fleet",
    `--count=${SMOKE ? 200 : 10_000}`,
    `--interval-ms=${intervalMs}`,
    `--qos=${qos}`,
    `--warmup-ms=${intervalMs + 1000}`, // after the common --warmup-ms: this one counts
  ];
}

/** Scenario id → load generator arguments. */
const SCENARIOS: Record<string, string[]> = {
  idle: ["--scenario=idle", `--count=${SMOKE ? 200 : 10_000}`],
  e2e: ["--scenario=e2e", "--rate=1000"],
  fanout: ["--scenario=fanout", `--subs=${SMOKE ? 10 : 100}`, "--window=200"],
  qos1: ["--scenario=qos1", "--conns=10", "--inflight=20"],
  qos1_10x2: ["--scenario=qos1", "--conns=10", "--inflight=2"],
  // A fleet of slow devices: 10,000 connected, each one 100-byte reading every 10 s.
  fleet_qos1: fleet(1),
  fleet_qos0: fleet(0),
  qos0_1: ["--scenario=qos0", "--conns=1"],
  qos0_10: ["--scenario=qos0", "--conns=10"],
  // Last: the sessions it leaves stored stay in the servers' memory.
  // Waits twice for the server's RSS to settle (up to 40 s each): see storedSessions().
  stored_sessions: [
    "--scenario=stored_sessions",
    `--count=${SMOKE ? 200 : 10_000}`,
    `--settle-ms=${SMOKE ? 500 : 40_000}`,
  ],
};
const IGGY = a.backend === "iggy";
const IGGY_ADDRESS = Deno.env.get("IGGY_TEST_ADDRESS") ?? "";
if (IGGY && IGGY_ADDRESS === "") {
  console.log("[bench] --backend=iggy needs IGGY_TEST_ADDRESS (a running Iggy server): SKIPPED");
  Deno.exit(0);
}
const scenarioIds = a.scenarios
  ? a.scenarios.split(",")
  : IGGY
  ? ["qos1", "qos0_10"]
  : [...Object.keys(SCENARIOS), "store"];
/** Scenarios run on gateways of their own, after the others. */
const OWN_GATEWAY_SCENARIOS = ["store", "forward", "retained", "ws", "catch_up"];
const unknownScenarios = scenarioIds.filter((id) =>
  !(id in SCENARIOS) && !OWN_GATEWAY_SCENARIOS.includes(id)
);
if (unknownScenarios.length > 0) {
  console.error(
    `[bench] --scenarios: unknown ${unknownScenarios.join(", ")} (known: ${
      [...Object.keys(SCENARIOS), ...OWN_GATEWAY_SCENARIOS].join(", ")
    }; start-up time and RSS at ready are measured in every run)`,
  );
  Deno.exit(2);
}

const launch: LaunchOptions = {
  taskset: has("taskset", ["-c", "0", "true"]),
  priority: !a["no-priority"] && has("setsid", ["sh", "-c", "echo -10 > /proc/$$/autogroup"]),
};
const stamp = new Date().toISOString().replace(/[:.]/g, "-");
const dataDir = `data/bench-${stamp}`;
await Deno.mkdir(`${ROOT}${dataDir}`, { recursive: true });
const tmpDir = await Deno.makeTempDir({ prefix: "iggy-mqtt-bench-" });
const gwFlags = a["gateway-deno-flags"] ? a["gateway-deno-flags"].split(" ") : [];
const defs: Record<string, ServerDef> = {
  gateway: gatewayServer(dataDir, gwFlags),
  // The opt-in epoll socket layer (permission set gateway-epoll), beside the strict default.
  "gateway-epoll": gatewayServer(dataDir, gwFlags, "gateway-epoll", {
    IGGY_MQTT_LISTENERS_TCP_SOCKET_LAYER: "epoll",
  }, "gateway-epoll"),
  mosquitto: mosquittoServer(tmpDir),
  aedes: aedesServer(),
  // What Deno itself costs a durable server (floor_server.ts): for the fleet, 1:1 and fan-out.
  "deno-floor": floorServer(tmpDir),
  ...(IGGY ? await iggyGateways(dataDir, gwFlags, stamp) : {}),
};
const unknownServers = a.servers.split(",").filter((n) => !(n in defs));
if (!IGGY && unknownServers.length > 0) {
  console.error(
    `[bench] --servers: unknown ${unknownServers.join(", ")} (known: ${
      Object.keys(defs).join(", ")
    })`,
  );
  await Deno.remove(`${ROOT}${dataDir}`, { recursive: true });
  await Deno.remove(tmpDir, { recursive: true });
  Deno.exit(2);
}
const serverNames = IGGY ? ["gateway", ...IGGY_VARIANTS.map((v) => v.name)] : a.servers.split(",");

/** Whether server `name` runs scenario `id` (the floor lists the few it can). */
function runsScenario(name: string, id: string): boolean {
  return defs[name].scenarios?.includes(id) ?? true;
}

/** Runs one scenario's load generator against one server; null (and a message) on failure. */
async function runLoadgen(s: Running, id: string): Promise<Record<string, unknown> | null> {
  const argv = launchArgv(launch, 1, [
    Deno.execPath(),
    "run",
    "-A",
    `${ROOT}tests/bench/loadgen.ts`,
    `--port=${s.port}`,
    `--server-pid=${s.pid}`,
    `--warmup-ms=${WARMUP_MS}`,
    `--duration-ms=${DURATION_MS}`,
    ...(SMOKE ? ["--max-msgs=20000"] : []),
    ...SCENARIOS[id],
  ]);
  const child = reapOnSignal(
    new Deno.Command(argv[0], { args: argv.slice(1), stdout: "piped", stderr: "piped" }).spawn(),
  );
  const killer = setTimeout(() => child.kill("SIGKILL"), WARMUP_MS + DURATION_MS + 170_000);
  const out = await child.output();
  clearTimeout(killer);
  const text = new TextDecoder().decode(out.stdout).trim().split("\n").at(-1) ?? "";
  if (!out.success || !text.startsWith("{")) {
    console.error(
      `[bench] ${id} on ${s.name} produced no figures: ${new TextDecoder().decode(out.stderr)}`,
    );
    if (s.tail()) console.error(`[bench] ${s.name} stderr (last lines):\n${s.tail().slice(-1500)}`);
    return null;
  }
  return JSON.parse(text);
}

/**
 * Waits until every server under test is quiet (< 5% CPU in each of 4 consecutive 250 ms
 * windows, at most 15 s): all servers share core 0, so one still cleaning up after the previous
 * scenario would otherwise be measured as the next server's latency. One quiet window was not
 * enough: aedes closing 10,000 sockets paused between bursts, and a burst after the wait put
 * 160 ms into the gateway's 1:1 p99 (a run on 2026-11-30). Returns how long it waited.
 */
async function settle(): Promise<number> {
  const t0 = performance.now();
  const pids = Object.values(servers).map((s) => s.pid);
  let quiet = 0;
  while (performance.now() - t0 < 15_000 && quiet < QUIET_WINDOWS) {
    const before = pids.map((pid) => cpuTicks(pid));
    const w0 = performance.now();
    await new Promise((r) => setTimeout(r, 250));
    const wall = performance.now() - w0;
    const busiest = Math.max(...pids.map((pid, i) => cpuPercent(cpuTicks(pid) - before[i], wall)));
    quiet = busiest < 5 ? quiet + 1 : 0;
  }
  return performance.now() - t0;
}

/** Consecutive quiet 250 ms windows {@link settle} waits for (one in smoke mode). */
const QUIET_WINDOWS = SMOKE ? 1 : 4;

const started = performance.now();
const results: Record<string, Record<string, unknown>> = {};
// A fresh clone has no results directory (it is ignored by git).
await Deno.mkdir(dirname(a.out), { recursive: true });
const servers: Record<string, Running> = {};
const startMs: Record<string, number[]> = {};
try {
  // Start to ready: full mode takes the median of three starts.
  for (const name of serverNames) {
    startMs[name] = [];
    const rss: number[] = [];
    for (let i = 0; i < (SMOKE ? 1 : 3); i++) {
      servers[name]?.stop && await servers[name].stop();
      servers[name] = await defs[name].start(launch);
      startMs[name].push(servers[name].readyMs);
      // RSS at ready, once what start-up left behind has run (timers, the first GC).
      await new Promise((r) => setTimeout(r, 500));
      rss.push(rssBytes(servers[name].pid) / 1024 / 1024);
    }
    results.start ??= {};
    results.start[name] = {
      readyMs: median(startMs[name]),
      runs: startMs[name],
      rssMb: median(rss),
      rssRunsMb: rss,
    };
    console.error(
      `[bench] ${name} ready in ${startMs[name].map((m) => m.toFixed(0)).join(", ")} ms`,
    );
  }
  for (const id of scenarioIds) {
    // After the others, on their own gateways.
    if (OWN_GATEWAY_SCENARIOS.includes(id)) continue;
    results[id] = {};
    for (const name of serverNames) {
      if (!runsScenario(name, id)) continue;
      // A fresh process per scenario: what ran before (10,000 closed connections, a grown
      // heap, a store of millions of messages) shows in neither memory nor latency.
      await servers[name].stop();
      servers[name] = await defs[name].start(launch);
      const waited = await settle();
      if (waited > 1500) console.error(`[bench] waited ${waited.toFixed(0)} ms for quiet servers`);
      const sendsBefore = IGGY ? await scrapeSends(servers[name].metricsUrl) : null;
      const r = await runLoadgen(servers[name], id);
      const iggySend = sendFigures(sendsBefore, await scrapeSends(servers[name].metricsUrl));
      results[id][name] = r && iggySend ? { ...r, iggySend } : r;
      console.error(`[bench] ${id} on ${name}: ${JSON.stringify(r)}`);
    }
  }
  if (scenarioIds.includes("forward")) {
    for (const s of Object.values(servers)) await s.stop();
    const rounds = SMOKE ? 1 : FORWARD_ROUNDS;
    const f = await forwardScenario(dataDir, gwFlags, launch, SMOKE, runLoadgen, rounds);
    results.forward = { gateway: { ...f } };
    console.log(
      `forward (${f.upstream}): backlog of ${f.drainMessages} drained at ${f.drainMsgPerSec} msg/s; ` +
        `live QoS 1 10x20 ${f.liveWith.toFixed(0)} msg/s with forwarding, ${
          f.liveWithout.toFixed(0)
        } without: ` +
        `${f.liveRatio.toFixed(2)}x (median of ${rounds} alternating round(s): ${
          f.liveRatios.map((r) => r.toFixed(2)).join(", ")
        }); forward lag p99 ${f.lagP99Messages} messages, ${f.lagP99Seconds.toFixed(3)} s; ` +
        `gateway CPU ${f.serverCpuWith.toFixed(0)}% with, ${
          f.serverCpuWithout.toFixed(0)
        }% without; ` +
        `load generator CPU ${f.loadgenCpu.toFixed(0)}%`,
    );
  }
  if (scenarioIds.includes("retained") && serverNames.includes("gateway")) {
    for (const s of Object.values(servers)) await s.stop();
    const r = await retainedScenario(dataDir, gwFlags, launch, SMOKE);
    results.retained = { gateway: r };
    console.log(
      `retained: ${r.receivedBySubscriber} of ${r.retainedTopics} received by a new '#' subscriber; ` +
        `start ${r.readyEmptyMs.toFixed(0)} ms empty, ${
          r.readyRetainedMs.toFixed(0)
        } ms with them ` +
        `(+${r.startExtraMs.toFixed(0)} ms); beyond the payload: heap ${
          r.heapPerMessageBytes.toFixed(0)
        } B/message, RSS ${r.rssPerMessageBytes.toFixed(0)} B/message`,
    );
  }
  if (scenarioIds.includes("catch_up") && serverNames.includes("gateway")) {
    for (const s of Object.values(servers)) await s.stop();
    const figures = await catchUpScenario(dataDir, gwFlags, launch, SMOKE);
    results.catch_up = { gateway: { backlogs: figures } };
    for (const f of figures) {
      console.log(
        `catch_up: ${f.received} of ${f.messages} messages of ${f.payloadBytes} B back to a ` +
          `stored session at ${f.msgPerSec} msg/s, ${f.mbPerSec} MB/s`,
      );
    }
  }
  if (scenarioIds.includes("ws") && serverNames.includes("gateway")) {
    for (const s of Object.values(servers)) await s.stop();
    const w = await wsScenario(dataDir, gwFlags, launch, SMOKE);
    results.ws = { gateway: w };
    const k = (x: number) => (x / 1000).toFixed(0) + "k";
    console.log(
      `ws: idle ${w.idleBytesPerConnWs.toFixed(0)} B/connection over WebSocket, ${
        w.idleBytesPerConnTcp.toFixed(0)
      } over TCP; QoS 1 ingest 10x20 over WebSocket ${w.ingestWs.map(k).join(", ")} msg/s, ` +
        `over TCP ${w.ingestTcp.map(k).join(", ")}: ${w.wsOverTcp.toFixed(2)}x ` +
        `(load CPU ${w.loadCpuWs.map((c) => c.toFixed(0)).join(", ")}% / ${
          w.loadCpuTcp.map((c) => c.toFixed(0)).join(", ")
        }%)`,
    );
  }
  if (scenarioIds.includes("store") && serverNames.includes("gateway")) {
    for (const s of Object.values(servers)) await s.stop();
    results.store = { gateway: await storeScenario(dataDir, gwFlags, launch, SMOKE) };
    console.error(`[bench] store on gateway: ${JSON.stringify(results.store.gateway)}`);
  }
} finally {
  for (const s of Object.values(servers)) await s.stop();
  await Deno.remove(`${ROOT}${dataDir}`, { recursive: true }).catch(() => {});
  await Deno.remove(tmpDir, { recursive: true }).catch(() => {});
}

const rows = figureRows(results, serverNames, IGGY ? IGGY_FIGURES : []);
if (IGGY) {
  console.log(renderIggyTable(rows));
  await Deno.writeTextFile(a.out, JSON.stringify({ mode: "iggy", rows, raw: results }, null, 2));
  console.log(`\ndeno task bench --backend=iggy: JSON in ${a.out}`);
  Deno.exit(0);
}
const report = {
  mode: SMOKE ? "smoke" : "full",
  date: new Date().toISOString(),
  command: `deno task bench${SMOKE ? " --smoke" : ""}`,
  totalSeconds: (performance.now() - started) / 1000,
  machine: machine(),
  launch: {
    ...launch,
    serverCore: 0,
    loadgenCore: 1,
    warmupMs: WARMUP_MS,
    durationMs: DURATION_MS,
  },
  servers: Object.fromEntries(serverNames.map((n) => [n, defs[n].runtime ?? ""])),
  rows,
  raw: results,
};
await Deno.mkdir(new URL(".", `file://${a.out}`).pathname, { recursive: true });
await Deno.writeTextFile(a.out, JSON.stringify(report, null, 2) + "\n");
console.log(renderTable(rows, serverNames));
console.log(`\n${report.command}: ${report.totalSeconds.toFixed(0)} s; JSON in ${a.out}`);

// Smoke: every figure of every scenario run must be a number (never a speed check).
const missing = rows.filter((r) =>
  FIGURES.some((f) => f.id === r.id) && scenarioIds.concat("start")
    .includes(r.scenario)
).flatMap((r) =>
  serverNames.filter((n) => r.scenario !== "store" || n === "gateway")
    .filter((n) => r.scenario === "start" || runsScenario(n, r.scenario))
    .filter((n) => typeof r.values[n] !== "number" || !Number.isFinite(r.values[n]))
    .map((n) => `${r.label} on ${n}`)
);
if (missing.length > 0) {
  console.error(`[bench] missing figures: ${missing.join("; ")}`);
  Deno.exit(1);
}
