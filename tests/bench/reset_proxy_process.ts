/**
 * The reset proxy (tests/helpers/reset_proxy.ts) as a process of its own, for benchmarks: its
 * timer then ticks on time however busy the measured process is. Prints `host:port`, then a
 * line per timed reset (`reset <connections>`), until killed.
 *
 *   deno run -A tests/bench/reset_proxy_process.ts --target=127.0.0.1:8090 --every-ms=2500
 *
 * @module
 */
import { parseArgs } from "node:util";
import { startResetProxy } from "../helpers/reset_proxy.ts";

const { values: a } = parseArgs({
  args: Deno.args,
  options: { target: { type: "string" }, "every-ms": { type: "string", default: "2500" } },
});
if (!a.target) throw new Error("--target is required");
const proxy = await startResetProxy({
  target: a.target,
  everyMs: Number(a["every-ms"]),
  onReset: (n) => console.log(`reset ${n}`),
});
console.log(proxy.address);
