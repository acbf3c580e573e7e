import assert from "node:assert/strict";
import {
  addDenoInfo,
  cycleViolations,
  type Import,
  layerOf,
  layerViolations,
  nameViolations,
  sizeViolations,
} from "./check_layers.ts";

const code = (to: string): Import => ({ to, typeOnly: false });
const type = (to: string): Import => ({ to, typeOnly: true });

Deno.test("layerOf() places a module by its folder; the two root files have their own layers", () => {
  assert.equal(layerOf("src/base/clock.ts"), 0);
  assert.equal(layerOf("src/log/iggy/pool.ts"), layerOf("src/log/port.ts"));
  assert.ok(layerOf("src/access/password.ts")! < layerOf("src/config/users.ts")!);
  assert.ok(layerOf("src/session/outbox.ts")! < layerOf("src/delivery/reader.ts")!);
  assert.ok(layerOf("src/log/port.ts")! < layerOf("src/stored/envelope.ts")!);
  assert.ok(layerOf("src/stored/envelope.ts")! < layerOf("src/session/outbox.ts")!);
  assert.ok(layerOf("src/gateway.ts")! < layerOf("main.ts")!);
  assert.equal(layerOf("src/new_folder/x.ts"), null);
});

Deno.test("layerViolations() names every upward and sideways import, type imports too", () => {
  const graph = new Map<string, Import[]>([
    ["src/log/topic_cache.ts", [code("src/base/clock.ts"), type("src/session/clock.ts")]],
    ["src/config/users.ts", [code("src/log/permissions.ts"), code("src/access/password.ts")]],
    ["src/codec/decoder.ts", [code("src/mapping/names.ts"), code("src/codec/errors.ts")]],
    ["src/log/embedded/backend.ts", [code("src/log/iggy/hash.ts")]],
    ["main.ts", [code("src/gateway.ts"), code("src/cli/args.ts")]],
  ]);
  assert.deepEqual(layerViolations(graph), [
    "sideways import: src/codec/decoder.ts (codec, layer 1) -> src/mapping/names.ts (mapping, layer 1)",
    "upward import: src/config/users.ts (config, layer 2) -> src/log/permissions.ts (log, layer 3)",
    "upward import: src/log/topic_cache.ts (log, layer 3) -> src/session/clock.ts (session, layer 5) [type]",
  ]);
});

Deno.test("layerViolations() keeps storage apart from MQTT: no codec, mapping or stored state in log/", () => {
  const graph = new Map<string, Import[]>([
    ["src/log/iggy/backend.ts", [type("src/codec/packets.ts"), code("src/config/types.ts")]],
    ["src/log/embedded/_batch.ts", [code("src/mapping/filter.ts"), code("src/log/port.ts")]],
    ["src/log/port.ts", [type("src/stored/envelope.ts")]],
    ["src/stored/envelope.ts", [type("src/codec/packets.ts"), code("src/log/port.ts")]],
  ]);
  assert.deepEqual(layerViolations(graph), [
    "barred import: src/log/embedded/_batch.ts (log, layer 3) -> src/mapping/filter.ts (mapping, layer 1)",
    "barred import: src/log/iggy/backend.ts (log, layer 3) -> src/codec/packets.ts (codec, layer 1) [type]",
    "upward import: src/log/port.ts (log, layer 3) -> src/stored/envelope.ts (stored, layer 4) [type]",
  ]);
});

Deno.test("layerViolations() refuses a module whose folder is in no layer", () => {
  const graph = new Map<string, Import[]>([["src/plugins/x.ts", [code("src/base/bytes.ts")]]]);
  assert.deepEqual(layerViolations(graph), [
    "no layer: src/plugins/x.ts (put its folder into LAYERS and docs/ARCHITECTURE.md)",
  ]);
});

Deno.test("cycleViolations() names one loop per cycle, through type imports too", () => {
  const graph = new Map<string, Import[]>([
    ["src/mapping/compile.ts", [code("src/mapping/names.ts"), code("src/mapping/resolve.ts")]],
    ["src/mapping/names.ts", [type("src/mapping/resolve.ts")]],
    ["src/mapping/resolve.ts", [type("src/mapping/compile.ts"), code("src/mapping/template.ts")]],
    ["src/mapping/template.ts", []],
    ["src/session/context.ts", [type("src/session/will.ts")]],
    ["src/session/will.ts", [type("src/session/context.ts")]],
    ["src/base/a.ts", [code("src/base/b.ts")]],
    ["src/base/b.ts", [code("src/base/a.ts")]],
    ["src/base/self.ts", [code("src/base/self.ts")]],
  ]);
  assert.deepEqual(cycleViolations(graph), [
    "cycle: src/base/a.ts -> src/base/b.ts -> src/base/a.ts",
    "cycle: src/base/self.ts -> src/base/self.ts",
    "cycle: src/mapping/compile.ts -> src/mapping/resolve.ts -> src/mapping/compile.ts",
    "cycle: src/session/context.ts -> src/session/will.ts -> src/session/context.ts",
  ]);
});

Deno.test("cycleViolations() finds nothing in a graph that only points down", () => {
  const graph = new Map<string, Import[]>([
    ["main.ts", [code("src/gateway.ts")]],
    ["src/gateway.ts", [code("src/base/clock.ts"), type("src/base/clock.ts")]],
    ["src/base/clock.ts", []],
  ]);
  assert.deepEqual(cycleViolations(graph), []);
});

Deno.test("addDenoInfo() keeps our .ts modules, marks type-only imports, drops npm/node/json", () => {
  const root = "file:///repo/";
  const graph = new Map<string, Import[]>();
  addDenoInfo(graph, {
    modules: [
      {
        specifier: `${root}src/config/load.ts`,
        dependencies: [
          { code: { specifier: `${root}src/base/address.ts` } },
          { type: { specifier: `${root}src/config/types.ts` } },
          { code: { specifier: "npm:/smol-toml@1.9.1" } },
          { code: { specifier: `${root}deno.json` } },
        ],
      },
      { specifier: "node:timers" },
      { specifier: `${root}deno.json` },
    ],
  }, root);
  assert.deepEqual([...graph], [[
    "src/config/load.ts",
    [code("src/base/address.ts"), type("src/config/types.ts")],
  ]]);
});

Deno.test("sizeViolations() names long files and functions outside the allowed ones", () => {
  const files = new Map([
    ["src/a/big.ts", {
      lines: 401,
      functions: [{ name: "ok", lines: 60 }, { name: "f", lines: 61 }],
    }],
    ["src/config/schema.ts", { lines: 900, functions: [] }],
    ["src/http/status_page_html.ts", {
      lines: 300,
      functions: [{ name: "renderStatusPage", lines: 130 }],
    }],
  ]);
  assert.deepEqual(sizeViolations(files), [
    "long file: src/a/big.ts has 401 lines (at most 400)",
    "long function: src/a/big.ts:f has 61 lines (at most 60)",
  ]);
});

Deno.test("nameViolations() names files a character or a word order apart, not one name twice", () => {
  assert.deepEqual(
    nameViolations([
      "src/delivery/client_queue.ts",
      "src/delivery/client_queues.ts",
      "src/log/header_blob.ts",
      "src/log/iggy/blob_headers.ts",
      "src/log/iggy/pool.ts",
      "src/log/iggy/v12/poll.ts",
      "src/log/embedded/_log_segment.ts",
      "src/log/embedded/log_segments.ts",
      "src/log/iggy/v11/records.ts",
      "src/log/iggy/v12/records.ts",
      "src/delivery/reader_pool.ts",
      "src/session/outbox.ts",
    ]),
    [
      "near-twin names: src/delivery/client_queue.ts and src/delivery/client_queues.ts (name what each holds)",
      "near-twin names: src/log/embedded/_log_segment.ts and src/log/embedded/log_segments.ts (name what each holds)",
      "near-twin names: src/log/header_blob.ts and src/log/iggy/blob_headers.ts (name what each holds)",
      "near-twin names: src/log/iggy/pool.ts and src/log/iggy/v12/poll.ts (name what each holds)",
    ],
  );
});
