/**
 * Top self-time functions of a V8 `.cpuprofile` (as written by `deno run --cpu-prof`), e.g. of
 * the gateway during one bench scenario:
 *
 *   deno task bench --servers=gateway --scenarios=qos1 \
 *     --gateway-deno-flags="--cpu-prof --cpu-prof-dir=/tmp/prof-qos1"
 *   deno run -A tests/bench/profile_top.ts /tmp/prof-qos1/*.cpuprofile [--top=25]
 *
 * @module
 */
import { parseArgs } from "node:util";

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const { values, positionals } = parseArgs({
  args: Deno.args,
  options: { top: { type: "string", default: "25" } },
  allowPositionals: true,
});

for (const file of positionals) {
  const p: Profile = JSON.parse(await Deno.readTextFile(file));
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  let total = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const dt = p.timeDeltas[i + 1] ?? 0;
    const f = byId.get(p.samples[i])!.callFrame;
    const where = f.url
      ? ` ${f.url.replace(/^.*\/(src|tests|node_modules|ext:)/, "$1")}:${f.lineNumber + 1}`
      : "";
    const key = `${f.functionName || "(anonymous)"}${where}`;
    self.set(key, (self.get(key) ?? 0) + dt);
    total += dt;
  }
  const busy = total - (self.get("(idle)") ?? 0);
  console.log(
    `\n${file}: ${(total / 1e6).toFixed(1)} s sampled, ${(busy / 1e6).toFixed(1)} s not idle`,
  );
  console.log("self ms | % of non-idle | function");
  const rows = [...self.entries()].filter(([k]) => k !== "(idle)").sort((x, y) => y[1] - x[1]);
  for (const [k, us] of rows.slice(0, Number(values.top))) {
    console.log(
      `${(us / 1000).toFixed(0).padStart(7)} | ${(us / busy * 100).toFixed(1).padStart(5)}% | ${k}`,
    );
  }
}
