/**
 * The benchmark's figures, floors (issues 5 and 19; issue 19's where both set one), ratios
 * gateway/peer and the printed table.
 *
 * @module
 */
import { FLOOR_SERVER } from "./_servers.ts";

type Raw = Record<string, unknown> | null | undefined;
const at = (r: Raw, path: string): number | null => {
  // deno-lint-ignore no-explicit-any
  const v = path.split(".").reduce((o: any, k) => (o == null ? o : o[k]), r);
  return typeof v === "number" && Number.isFinite(v) ? v : null;
};

/** A floor: a ratio to mosquitto, or an absolute bound on the gateway's figure. */
export interface Floor {
  readonly kind: "ratio>=" | "ratio<=" | "max<=";
  readonly floor: number;
  readonly goal: number;
}

/** One reported figure. */
export interface Figure {
  readonly id: string;
  readonly scenario: string;
  readonly label: string;
  readonly path: string;
  readonly scale?: number;
  readonly floor?: Floor;
}

/** Every figure, in table order. */
export const FIGURES: Figure[] = [
  {
    id: "qos0_1",
    scenario: "qos0_1",
    label: "QoS 0 ingest, 1 publisher (msg/s)",
    path: "msgsPerSec",
  },
  {
    id: "qos0_10",
    scenario: "qos0_10",
    label: "QoS 0 ingest, 10 publishers (msg/s)",
    path: "msgsPerSec",
    floor: { kind: "ratio>=", floor: 0.9, goal: 1.0 },
  },
  {
    id: "qos1",
    scenario: "qos1",
    label: "QoS 1 ingest 10×20 (msg/s)",
    path: "msgsPerSec",
    floor: { kind: "ratio>=", floor: 0.8, goal: 1.0 },
  },
  { id: "qos1_p50", scenario: "qos1", label: "QoS 1 PUBACK p50 (ms)", path: "puback.p50" },
  {
    id: "qos1_p99",
    scenario: "qos1",
    label: "QoS 1 PUBACK p99 (ms)",
    path: "puback.p99",
    floor: { kind: "max<=", floor: 3, goal: 3 },
  },
  { id: "qos1_p999", scenario: "qos1", label: "QoS 1 PUBACK p99.9 (ms)", path: "puback.p999" },
  {
    id: "fanout",
    scenario: "fanout",
    label: "fan-out 1→100 (deliveries/s)",
    path: "deliveriesPerSec",
    floor: { kind: "ratio>=", floor: 0.8, goal: 1.5 },
  },
  { id: "fanout_p50", scenario: "fanout", label: "fan-out latency p50 (ms)", path: "latency.p50" },
  { id: "fanout_p99", scenario: "fanout", label: "fan-out latency p99 (ms)", path: "latency.p99" },
  { id: "e2e_p50", scenario: "e2e", label: "1:1 at 1,000 msg/s e2e p50 (ms)", path: "latency.p50" },
  {
    id: "e2e_p99",
    scenario: "e2e",
    label: "1:1 at 1,000 msg/s e2e p99 (ms)",
    path: "latency.p99",
    floor: { kind: "max<=", floor: 5, goal: 2 },
  },
  {
    id: "qos1_10x2",
    scenario: "qos1_10x2",
    label: "QoS 1 ingest 10×2 (msg/s)",
    path: "msgsPerSec",
    floor: { kind: "ratio>=", floor: 0.9, goal: 1.0 },
  },
  {
    id: "qos1_10x2_p99",
    scenario: "qos1_10x2",
    label: "QoS 1 10×2 PUBACK p99 (ms)",
    path: "puback.p99",
  },
  ...fleetFigures(1),
  ...fleetFigures(0),
  {
    id: "idle_rss",
    scenario: "idle",
    label: "RSS per idle connection (KB)",
    path: "rssPerConnBytes",
    scale: 1 / 1024,
    // The floor is the default gateway's, on node:net under the strict permission set; the
    // gateway-epoll column is held to 4 KB by reading it (docs/BENCHMARKS.md).
    floor: { kind: "max<=", floor: 8, goal: 4 },
  },
  { id: "idle_cps", scenario: "idle", label: "connects/s (idle scenario)", path: "connectsPerSec" },
  {
    id: "stored_session_rss",
    scenario: "stored_sessions",
    label: "RSS per offline stored session, one subscription (KB)",
    path: "rssPerSessionBytes",
    scale: 1 / 1024,
    floor: { kind: "max<=", floor: 2, goal: 1 },
  },
  {
    id: "start",
    scenario: "start",
    label: "start to ready (ms, median of runs)",
    path: "readyMs",
    floor: { kind: "max<=", floor: 1000, goal: 200 },
  },
  {
    id: "start_rss",
    scenario: "start",
    label: "RSS at ready, empty store (MB, median)",
    path: "rssMb",
    floor: { kind: "max<=", floor: 60, goal: 40 },
  },
  {
    id: "store_rss_large",
    scenario: "store",
    label: "RSS at ready, large store (MB)",
    path: "rssLargeMb",
  },
  {
    id: "store_rss_per_gb",
    scenario: "store",
    label: "RSS added per GB of store at open (MB)",
    path: "rssPerGbMb",
    floor: { kind: "max<=", floor: 5, goal: 1 },
  },
  {
    id: "store_open_ms",
    scenario: "store",
    label: "large store: start to ready (ms)",
    path: "readyLargeMs",
  },
];

const CPU_SCENARIOS = [
  "qos0_1",
  "qos0_10",
  "qos1",
  "qos1_10x2",
  "fanout",
  "e2e",
  "fleet_qos1",
  "fleet_qos0",
  "idle",
  "stored_sessions",
];

/**
 * The fleet scenario's figures (issue 41): 10,000 devices, one reading each every 10 s. CPU within
 * 2× Mosquitto's; PUBACK p99 within the disk's fdatasync p99 + 1 ms (here ≈ 0.4 ms: 1.4 ms).
 */
function fleetFigures(qos: 0 | 1): Figure[] {
  const scenario = `fleet_qos${qos}`;
  const name = `fleet QoS ${qos} (10,000 devices × 1 per 10 s)`;
  return [
    {
      id: `${scenario}_cpu`,
      scenario,
      label: `${name}: server CPU %`,
      path: "serverCpuPct",
      floor: { kind: "ratio<=", floor: 2, goal: 1.5 },
    },
    ...(qos === 1
      ? [
        { id: `${scenario}_p50`, scenario, label: `${name}: PUBACK p50 (ms)`, path: "puback.p50" },
        {
          id: `${scenario}_p99`,
          scenario,
          label: `${name}: PUBACK p99 (ms)`,
          path: "puback.p99",
          floor: { kind: "max<=" as const, floor: 1.4, goal: 1 },
        },
      ]
      : []),
    { id: `${scenario}_d50`, scenario, label: `${name}: delivery p50 (ms)`, path: "latency.p50" },
    { id: `${scenario}_d99`, scenario, label: `${name}: delivery p99 (ms)`, path: "latency.p99" },
    { id: `${scenario}_rss`, scenario, label: `${name}: server RSS (MB)`, path: "serverRssMb" },
  ];
}

/**
 * Above this share of its core (%) the load generator, not the server, may have set a
 * throughput figure: the figure is marked client-bound, its ratio printed as a bound.
 */
export const CLIENT_BOUND_PCT = 85;

/**
 * Figures a saturated load generator caps (rates it drives as fast as it can; the idle
 * scenario opens its connections as fast as CONNACKs come back).
 */
const THROUGHPUT_PATHS = new Set(["msgsPerSec", "deliveriesPerSec", "connectsPerSec"]);

/** A row of the table. */
export interface Row {
  readonly id: string;
  readonly scenario: string;
  readonly label: string;
  readonly values: Record<string, number | null>;
  readonly ratioMosquitto: number | null;
  readonly ratioAedes: number | null;
  /** Gateway / deno-floor (floor_server.ts), when the floor ran. */
  readonly ratioFloor: number | null;
  /**
   * Servers whose figure the load generator may have capped (its CPU over
   * {@link CLIENT_BOUND_PCT} in their run): a peer's figure is then a lower bound, so the
   * gateway's ratio to it is at most the printed value; the gateway's own, at least.
   */
  readonly clientBound: readonly string[];
  readonly floor?: Floor;
  /** true/false when the floor could be judged, null otherwise. */
  readonly floorMet: boolean | null;
  readonly goalMet: boolean | null;
}

/** Rows from raw results: figures, then server CPU% per scenario. */
export function figureRows(
  results: Record<string, Record<string, unknown>>,
  servers: string[],
  extra: readonly Figure[] = [],
) {
  const figs: Figure[] = [
    ...FIGURES,
    ...extra,
    ...CPU_SCENARIOS.map((s) => ({
      id: `cpu_${s}`,
      scenario: s,
      label: `server CPU% during ${s}`,
      path: "serverCpuPct",
    })),
    ...CPU_SCENARIOS.map((s) => ({
      id: `lgcpu_${s}`,
      scenario: s,
      label: `load generator CPU% during ${s}`,
      path: "loadgenCpuPct",
    })),
  ];
  return figs.filter((f) => f.scenario in results).map((f): Row => {
    const values: Record<string, number | null> = {};
    for (const s of servers) {
      const v = at(results[f.scenario]?.[s] as Raw, f.path);
      values[s] = v === null ? null : v * (f.scale ?? 1);
    }
    const ratio = (p: string) =>
      values.gateway != null && values[p] != null && values[p] !== 0
        ? values.gateway / values[p]!
        : null;
    const rm = ratio("mosquitto");
    const clientBound = THROUGHPUT_PATHS.has(f.path)
      ? servers.filter((s) => {
        const cpu = at(results[f.scenario]?.[s] as Raw, "loadgenCpuPct");
        return cpu !== null && cpu > CLIENT_BOUND_PCT;
      })
      : [];
    const judge = (bound: number) => {
      if (!f.floor) return null;
      if (f.floor.kind === "ratio<=") return rm === null ? null : rm <= bound;
      if (f.floor.kind === "ratio>=") {
        if (rm === null) return null;
        // A client-bound figure is never a win: only a bound that misses the floor judges.
        if (clientBound.includes("mosquitto")) return rm < bound ? false : null;
        if (clientBound.includes("gateway")) return null;
        return rm >= bound;
      }
      return values.gateway == null ? null : values.gateway <= bound;
    };
    return {
      id: f.id,
      scenario: f.scenario,
      label: f.label,
      values,
      ratioMosquitto: rm,
      ratioAedes: ratio("aedes"),
      ratioFloor: ratio(FLOOR_SERVER),
      clientBound,
      floor: f.floor,
      floorMet: f.floor ? judge(f.floor.floor) : null,
      goalMet: f.floor ? judge(f.floor.goal) : null,
    };
  });
}

function fmt(v: number | null): string {
  if (v === null) return "—";
  if (Math.abs(v) >= 1000) return Math.round(v).toLocaleString("en-US");
  if (Math.abs(v) >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

/** Markdown table: figure, one column per server, ratios, floor and whether it is met. */
export function renderTable(rows: Row[], servers: string[]): string {
  const peers = ["mosquitto", "aedes", ...servers.includes(FLOOR_SERVER) ? [FLOOR_SERVER] : []];
  const head = [
    "figure",
    ...servers,
    ...peers.map((p) => p === FLOOR_SERVER ? "gw/floor" : `gw/${p}`),
    "floor (goal)",
    "floor met",
  ];
  const lines = [`| ${head.join(" | ")} |`, `|${head.map(() => " --- ").join("|")}|`];
  for (const r of rows) {
    const floor = !r.floor
      ? ""
      : r.floor.kind === "ratio>="
      ? `≥ ${r.floor.floor}× (${r.floor.goal}×)`
      : r.floor.kind === "ratio<="
      ? `≤ ${r.floor.floor}× (${r.floor.goal}×)`
      : `≤ ${r.floor.floor} (${r.floor.goal})`;
    const bound = r.clientBound.length > 0 ? `client-bound (${r.clientBound.join(", ")})` : "";
    const met = r.floorMet === null
      ? bound
      : r.floorMet
      ? (r.goalMet ? "yes (goal)" : "yes")
      : bound === ""
      ? "**no**"
      : `**no**, ${bound}`;
    const ratios = peers.map((peer) => {
      const x = peer === "mosquitto"
        ? r.ratioMosquitto
        : peer === "aedes"
        ? r.ratioAedes
        : r.ratioFloor;
      return x === null ? "—" : `${boundPrefix(r.clientBound, peer)}${x.toFixed(2)}×`;
    });
    lines.push(
      `| ${
        [r.label, ...servers.map((s) => fmt(r.values[s])), ...ratios, floor, met].join(" | ")
      } |`,
    );
  }
  return lines.join("\n");
}

/**
 * "≤ " when the peer's figure was client-bound (its true figure is higher, so the ratio is
 * lower), "≥ " when only the gateway's was, "~ " when both were (no bound either way).
 */
export function boundPrefix(clientBound: readonly string[], peer: string): string {
  const peerBound = clientBound.includes(peer);
  const gatewayBound = clientBound.includes("gateway");
  if (peerBound && gatewayBound) return "~ ";
  if (peerBound) return "≤ ";
  return gatewayBound ? "≥ " : "";
}

function sh(cmd: string, args: string[]): string {
  try {
    const o = new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).outputSync();
    return new TextDecoder().decode(o.stdout).trim() || new TextDecoder().decode(o.stderr).trim();
  } catch {
    return "";
  }
}

/** The machine the figures come from. */
export function machine() {
  const cpuinfo = Deno.readTextFileSync("/proc/cpuinfo");
  const mem = Deno.readTextFileSync("/proc/meminfo").match(/MemTotal:\s+(\d+) kB/);
  return {
    nproc: Number(sh("nproc", [])),
    cpuModel: cpuinfo.match(/model name\s*:\s*(.*)/)?.[1] ?? "unknown",
    memoryGiB: mem ? Math.round(Number(mem[1]) / 1024 / 1024 * 10) / 10 : null,
    kernel: sh("uname", ["-r"]),
    deno: Deno.version.deno,
    v8: Deno.version.v8,
    mosquitto: sh("/usr/sbin/mosquitto", ["-h"]).split("\n")[0],
    loadAverageAtEnd: Deno.readTextFileSync("/proc/loadavg").trim(),
  };
}
