/**
 * `deno task start`, the compiled binaries and the bench's gateway run with the same runtime
 * flags (issue 19: a memory flag measured under `deno run` must hold for the binary too).
 */
import assert from "node:assert/strict";
import { startTaskFlags } from "./_servers.ts";

Deno.test("deno.json: the compile tasks carry every runtime flag of the start task", async () => {
  const config = JSON.parse(await Deno.readTextFile(new URL("../../deno.json", import.meta.url)));
  const flags = startTaskFlags();
  assert.ok(flags.includes("-P=gateway"), `start task flags: ${flags.join(" ")}`);
  assert.ok(
    flags.includes("--no-code-cache"),
    "RSS at ready: no V8 code cache (docs/BENCHMARKS.md, decision records)",
  );
  assert.ok(
    flags.includes("--v8-flags=--max-semi-space-size=4"),
    "young generation chosen by measurement (QoS 1 PUBACK p99, idle memory)",
  );
  for (const task of ["compile", "compile:arm64"]) {
    const words = String(config.tasks[task]).split(/\s+/);
    for (const f of flags) assert.ok(words.includes(f), `${task} lacks ${f}`);
  }
});
