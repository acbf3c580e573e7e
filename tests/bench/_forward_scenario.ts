/**
 * The "forward" scenario (forward mode, an edge box with an uplink):
 * - drain: a backlog of `messages` 100-byte messages in the embedded log (build_store.ts) is
 *   forwarded by a gateway started on it; the figure is messages per second from ready until
 *   `forward_lag_messages` is 0, into topics the forwarder creates (fsync-enforced);
 * - live: QoS 1 10×20 ingest (the qos1 load) into the gateway without forwarding and with it,
 *   back to back, in `rounds` pairs whose order alternates (a shared machine's speed drifts
 *   between runs: the median of the pairs' ratios is the figure, and every pair's is kept),
 *   and the forward lag sampled every 100 ms during the forwarding runs (p99).
 * The upstream is the Iggy at `IGGY_TEST_ADDRESS` (`IGGY_TEST_USERNAME`/`IGGY_TEST_PASSWORD`,
 * `IGGY_TEST_PROTOCOL`), or else the fake Iggy in a process of its own (labelled: its speed
 * says nothing about Iggy's). Start Iggy off the gateway's core: `taskset -c 1` with
 * `IGGY_SYSTEM_SHARDING_CPU_ALLOCATION=1` (one shard, bound within the allowed cores). Iggy
 * 0.9's default allocation binds a shard to every core whatever the `taskset` mask, so one of
 * them shares core 0 with the gateway and takes part of its CPU.
 *
 * @module
 */
import { gatewayServer, type LaunchOptions, ROOT, type Running } from "./_servers.ts";
import { median } from "./_stats.ts";

/** What the scenario measured. */
export interface ForwardFigures {
  readonly upstream: string;
  readonly drainMessages: number;
  readonly drainMsgPerSec: number;
  /** Medians over the rounds. */
  readonly liveWithout: number;
  readonly liveWith: number;
  readonly liveRatio: number;
  /** Each round's with / without. */
  readonly liveRatios: readonly number[];
  readonly lagP99Messages: number;
  readonly lagP99Seconds: number;
  readonly loadgenCpu: number;
  /** The gateway's CPU% during the live load, without and with forwarding. */
  readonly serverCpuWithout: number;
  readonly serverCpuWith: number;
}

type Loadgen = (s: Running, id: string) => Promise<Record<string, unknown> | null>;

/** Starts the upstream; returns its address, a label and a stop. */
async function upstream(smoke: boolean) {
  const real = Deno.env.get("IGGY_TEST_ADDRESS");
  if (real) return { address: real, label: `Iggy at ${real}`, stop: () => Promise.resolve() };
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", `${ROOT}tests/bench/fake_upstream.ts`],
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const reader = child.stdout.getReader();
  const { value } = await reader.read();
  reader.releaseLock();
  const address = new TextDecoder().decode(value).trim();
  const label = `fake Iggy ${address} (not a figure for Iggy)${smoke ? ", smoke" : ""}`;
  return {
    address,
    label,
    stop: async () => {
      child.kill("SIGKILL");
      await child.status;
      await child.stdout.cancel().catch(() => {});
    },
  };
}

function forwardEnv(address: string): Record<string, string> {
  return {
    IGGY_MQTT_FORWARD_ENABLED: "true",
    IGGY_MQTT_IGGY_ADDRESS: address,
    IGGY_MQTT_IGGY_USERNAME: Deno.env.get("IGGY_TEST_USERNAME") ?? "iggy",
    IGGY_MQTT_IGGY_PASSWORD: Deno.env.get("IGGY_TEST_PASSWORD") ?? "iggy",
    IGGY_MQTT_IGGY_PROTOCOL: Deno.env.get("IGGY_TEST_PROTOCOL") ?? "auto",
  };
}

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(url)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  return line ? Number(line.slice(name.length + 1)) : NaN;
}

function p99(xs: number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.floor(s.length * 0.99))];
}

/** Builds an embedded store at `path` holding `messages` bench messages in `stream` (build_store.ts). */
export async function buildBacklog(path: string, messages: number, stream: string): Promise<void> {
  const built = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      `${ROOT}tests/bench/build_store.ts`,
      `--path=${path}`,
      `--messages=${messages}`,
      `--stream=${stream}`,
    ],
    cwd: ROOT,
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!built.success) throw new Error(new TextDecoder().decode(built.stderr).slice(-800));
}

/** Drain rate of a backlog of `messages` (msg/s), from the gateway's ready to no lag. */
async function drain(
  dataDir: string,
  flags: string[],
  launch: LaunchOptions,
  env: Record<string, string>,
  messages: number,
): Promise<number> {
  const path = `${dataDir}/forward-backlog/gateway.db`;
  const stream = `bench-forward-${Date.now()}`;
  await buildBacklog(path, messages, stream);
  const def = gatewayServer(dataDir, flags, "gateway-forward-drain", {
    ...env,
    IGGY_MQTT_EMBEDDED_PATH: path,
  });
  const s = await def.start(launch);
  const t0 = performance.now();
  try {
    const url = s.metricsUrl!;
    for (;;) {
      const sent = await metric(url, `forward_messages{kind="sent"}`);
      if (sent >= messages) break;
      if (performance.now() - t0 > 600_000) throw new Error(`drain stuck at ${sent}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    return messages / ((performance.now() - t0) / 1000);
  } finally {
    await s.stop();
  }
}

/** Runs the scenario; `loadgen` runs the qos1 load against a server. */
export async function forwardScenario(
  dataDir: string,
  flags: string[],
  launch: LaunchOptions,
  smoke: boolean,
  loadgen: Loadgen,
  rounds = 1,
): Promise<ForwardFigures> {
  const up = await upstream(smoke);
  try {
    const env = forwardEnv(up.address);
    const messages = smoke ? 20_000 : 1_000_000;
    const drainMsgPerSec = await drain(dataDir, flags, launch, env, messages);
    const rate = (r: Record<string, unknown> | null) => Number(r?.msgsPerSec ?? NaN);
    const cpu = (r: Record<string, unknown> | null) => Number(r?.serverCpuPct ?? NaN);
    const lags: number[] = [];
    const lagSeconds: number[] = [];
    const without: (Record<string, unknown> | null)[] = [];
    const withFwd: (Record<string, unknown> | null)[] = [];
    const runWithout = async () => {
      const plain = await gatewayServer(dataDir, flags, "gateway").start(launch);
      without.push(await loadgen(plain, "qos1").finally(() => plain.stop()));
    };
    const runWith = async () => {
      const fwd = await gatewayServer(dataDir, flags, "gateway-forward", env).start(launch);
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          lags.push(await metric(fwd.metricsUrl!, "forward_lag_messages").catch(() => NaN));
          lagSeconds.push(await metric(fwd.metricsUrl!, "forward_lag_seconds").catch(() => NaN));
          await new Promise((r) => setTimeout(r, 100));
        }
      })();
      withFwd.push(await loadgen(fwd, "qos1"));
      sampling = false;
      await sampler;
      await fwd.stop();
    };
    for (let round = 0; round < rounds; round++) {
      if (round % 2 === 0) {
        await runWithout();
        await runWith();
      } else {
        await runWith();
        await runWithout();
      }
    }
    const ratios = withFwd.map((w, i) => rate(w) / rate(without[i]));
    return {
      upstream: up.label,
      drainMessages: messages,
      drainMsgPerSec: Math.round(drainMsgPerSec),
      liveWith: median(withFwd.map(rate)),
      liveWithout: median(without.map(rate)),
      liveRatio: median(ratios),
      liveRatios: ratios,
      lagP99Messages: p99(lags.filter(Number.isFinite)),
      lagP99Seconds: p99(lagSeconds.filter(Number.isFinite)),
      loadgenCpu: Math.max(...withFwd.map((w) => Number(w?.loadgenCpuPct ?? NaN))),
      serverCpuWithout: median(without.map(cpu)),
      serverCpuWith: median(withFwd.map(cpu)),
    };
  } finally {
    await up.stop();
  }
}
