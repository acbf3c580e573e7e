/**
 * `deno task bench --backend=iggy`: the gateway through a real Iggy server beside the same
 * gateway on its embedded log, in one run. Two Iggy variants: topics auto-created with fsync
 * enforced (the default) and with the server's defaults. Each variant writes to its own
 * stream (a map file per variant in the bench's data directory), so their topics differ.
 *
 * The gateways run pinned to core 0 like every server under test; the Iggy server is the
 * operator's to start, on the other core (`taskset -c 1` and
 * `IGGY_SYSTEM_SHARDING_CPU_ALLOCATION=1`: Iggy's default binds a shard to every core, core 0
 * included, whatever the mask), where the load generator runs too: on a 2-core machine nothing
 * else is free, so the load generator's CPU is printed beside.
 *
 * @module
 */
import { gatewayServer, ROOT, type ServerDef } from "./_servers.ts";
import type { Figure, Row } from "./_report.ts";

/** The Iggy variants, by gateway server name. */
export const IGGY_VARIANTS = [
  { name: "iggy_fsync", durability: "fsync", label: "Iggy, fsync topics" },
  { name: "iggy_default", durability: "server_default", label: "Iggy, server-default topics" },
] as const;

/** Targets of the issue: ratio to the embedded log per scenario and variant. */
const TARGETS: Record<string, Record<string, number>> = {
  qos1: { iggy_fsync: 0.7, iggy_default: 0.9 },
  qos0_10: { iggy_fsync: 0.7, iggy_default: 0.7 },
};

/** Rows of the Iggy table only: what Iggy's sends took (`iggy_send_seconds`, the gateway's). */
export const IGGY_FIGURES: readonly Figure[] = ["qos1", "qos0_10"].flatMap((s) => [
  { id: `send_ms_${s}`, scenario: s, label: `Iggy send, mean (ms), ${s}`, path: "iggySend.ms" },
  {
    id: `send_msgs_${s}`,
    scenario: s,
    label: `messages per Iggy send, ${s}`,
    path: "iggySend.messages",
  },
]);

/** Sum and count of a gateway's `iggy_send_seconds` and `iggy_send_messages`; null if none. */
export async function scrapeSends(
  metricsUrl: string | undefined,
): Promise<{ seconds: number; messages: number; sends: number } | null> {
  if (metricsUrl === undefined) return null;
  try {
    const text = await (await fetch(metricsUrl)).text();
    const value = (name: string) => {
      const m = text.match(new RegExp(`^${name} (\\S+)$`, "m"));
      return m === null ? null : Number(m[1]);
    };
    const seconds = value("iggy_send_seconds_sum");
    const sends = value("iggy_send_seconds_count");
    const messages = value("iggy_send_messages_sum");
    if (seconds === null || sends === null || messages === null) return null;
    return { seconds, messages, sends };
  } catch {
    return null;
  }
}

/**
 * Mean send time (ms) and messages per send between two scrapes: the whole scenario, warm-up
 * included. Undefined without sends (the embedded log).
 */
export function sendFigures(
  before: Awaited<ReturnType<typeof scrapeSends>>,
  after: Awaited<ReturnType<typeof scrapeSends>>,
): { ms: number; messages: number } | undefined {
  if (before === null || after === null || after.sends <= before.sends) return undefined;
  const sends = after.sends - before.sends;
  return {
    ms: (after.seconds - before.seconds) * 1000 / sends,
    messages: (after.messages - before.messages) / sends,
  };
}

/** One gateway per variant, in Iggy mode against IGGY_TEST_ADDRESS. */
export async function iggyGateways(
  dataDir: string,
  denoFlags: string[],
  stamp: string,
): Promise<Record<string, ServerDef>> {
  const out: Record<string, ServerDef> = {};
  const suffix = stamp.replace(/[^0-9]/g, "").slice(-10);
  for (const v of IGGY_VARIANTS) {
    const map = `${dataDir}/${v.name}-map.toml`;
    await Deno.writeTextFile(
      `${ROOT}${map}`,
      `default_stream = "bench_${v.name}_${suffix}"\ndefault_topic = "messages_default"\n`,
    );
    out[v.name] = gatewayServer(dataDir, denoFlags, v.name, {
      IGGY_MQTT_GATEWAY_BACKEND: "iggy",
      IGGY_MQTT_GATEWAY_ID: `bench-${v.name}`,
      IGGY_MQTT_IGGY_ADDRESS: Deno.env.get("IGGY_TEST_ADDRESS")!,
      IGGY_MQTT_IGGY_USERNAME: Deno.env.get("IGGY_TEST_USERNAME") || "iggy",
      IGGY_MQTT_IGGY_PASSWORD: Deno.env.get("IGGY_TEST_PASSWORD") || "iggy",
      IGGY_MQTT_MAPPING_MAP_FILE: map,
      IGGY_MQTT_LOG_AUTO_CREATE_DURABILITY: v.durability,
      // Tuning runs: IGGY_MQTT_IGGY_POOL_SIZE=4 etc. in the bench's environment reach these.
      ...Object.fromEntries(
        Object.entries(Deno.env.toObject()).filter(([k]) => k.startsWith("IGGY_MQTT_IGGY_")),
      ),
    });
  }
  return out;
}

const fmt = (v: number | null | undefined, digits = 0) =>
  v == null || !Number.isFinite(v) ? "–" : v.toLocaleString("en-US", {
    maximumFractionDigits: digits,
    minimumFractionDigits: digits,
  });

/** Markdown table: figure, embedded, each variant, each variant's ratio to embedded. */
export function renderIggyTable(rows: readonly Row[]): string {
  const head = [
    "figure",
    "embedded",
    ...IGGY_VARIANTS.map((v) => v.label),
    ...IGGY_VARIANTS.map((v) => `${v.name}/embedded (target)`),
  ];
  const lines = [`| ${head.join(" | ")} |`, `|${head.map(() => " --- |").join("")}`];
  for (const r of rows) {
    if (r.values.gateway == null && IGGY_VARIANTS.every((v) => r.values[v.name] == null)) continue;
    const digits = r.label.includes("(ms)") || r.label.includes("CPU") ? 1 : 0;
    const ratios = IGGY_VARIANTS.map((v) => {
      const base = r.values.gateway;
      const x = r.values[v.name];
      if (base == null || x == null || base === 0) return "–";
      const target = r.id === r.scenario ? TARGETS[r.scenario]?.[v.name] : undefined;
      const ratio = x / base;
      return target === undefined
        ? `${ratio.toFixed(2)}×`
        : `${ratio.toFixed(2)}× (≥ ${target}: ${ratio >= target ? "met" : "missed"})`;
    });
    lines.push(
      `| ${
        [
          r.label,
          fmt(r.values.gateway, digits),
          ...IGGY_VARIANTS.map((v) => fmt(r.values[v.name], digits)),
          ...ratios,
        ].join(" | ")
      } |`,
    );
  }
  return lines.join("\n");
}
