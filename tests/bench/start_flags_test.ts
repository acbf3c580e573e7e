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

Deno.test("deno.json: the compile tasks --include every module loaded from a URL built at run time", async () => {
  const config = JSON.parse(await Deno.readTextFile(new URL("../../deno.json", import.meta.url)));
  const root = new URL("../../", import.meta.url);
  const files = ["main.ts"];
  for await (const f of walkTs(new URL("src/", root))) files.push(f.slice(root.pathname.length));
  const loaded = new Set<string>();
  for (const file of files) {
    if (file.endsWith("_test.ts")) continue;
    const text = await Deno.readTextFile(new URL(file, root));
    for (const m of text.matchAll(/new URL\("(\.{1,2}\/[^"]+\.ts)", import\.meta\.url\)/g)) {
      loaded.add(new URL(m[1], new URL(file, root)).pathname.slice(root.pathname.length));
    }
  }
  assert.ok(loaded.has("src/cli/tools.ts") && loaded.has("src/tls_wiring.ts"), [...loaded].join());
  for (const task of ["compile", "compile:arm64", "compile:epoll", "compile:epoll:arm64"]) {
    const words = String(config.tasks[task]).split(/\s+/);
    const included = new Set(words.filter((_, i) => words[i - 1] === "--include"));
    for (const path of loaded) assert.ok(included.has(path), `${task} lacks --include ${path}`);
  }
});

async function* walkTs(dir: URL): AsyncGenerator<string> {
  for await (const e of Deno.readDir(dir)) {
    const url = new URL(e.name + (e.isDirectory ? "/" : ""), dir);
    if (e.isDirectory) yield* walkTs(url);
    else if (e.name.endsWith(".ts")) yield url.pathname;
  }
}
