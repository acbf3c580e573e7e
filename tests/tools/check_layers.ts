/**
 * The layer rule of docs/ARCHITECTURE.md ("imports point down only"), checked over the module
 * graph that `deno info --json` reports for `main.ts` and every other non-test module in
 * `src/` (workers and test doubles are not reached from `main.ts`).
 *
 * ```sh
 * deno task layers            # upward, sideways or barred imports, files in no layer, cycles,
 *                             # files named a character or a word order apart
 * deno task layers --sizes    # also: files over 400 lines, functions over 60 lines
 * ```
 *
 * Prints `layers: ok` or one line per violation naming the import, and exits 1 on any.
 * `import type` counts like any import, for the layer rule and for cycles: a circle of types
 * is erased at run time, but the files still cannot be read, moved or tested one at a time.
 *
 * @module
 */

/**
 * Layers from the bottom: a module may import its own folder and any lower layer, nothing else.
 * Storage (`log`: the port and its adapters) sits below the MQTT state kept in it (`stored`).
 */
export const LAYERS: readonly (readonly string[])[] = [
  ["base"],
  ["codec", "mapping", "observe", "access"],
  ["config"],
  ["log"],
  ["stored"],
  ["session"],
  ["delivery", "forward"],
  ["net"],
  ["http"],
  ["gateway", "cli"],
  ["main"],
];

/**
 * Lower folders that a folder may not import all the same: storage keeps bytes and headers
 * and knows neither MQTT packets nor the topic map.
 */
export const BARRED: ReadonlyMap<string, readonly string[]> = new Map([
  ["log", ["codec", "mapping"]],
]);

/** Files allowed over {@link MAX_FILE_LINES}: the config table and the status page template. */
export const LONG_FILES: ReadonlySet<string> = new Set([
  "src/config/schema.ts",
  "src/http/status_page_html.ts",
]);
/** Functions allowed over {@link MAX_FUNCTION_LINES}, as `path:name`. */
export const LONG_FUNCTIONS: ReadonlySet<string> = new Set([
  "src/http/status_page_html.ts:renderStatusPage",
]);
export const MAX_FILE_LINES = 400;
export const MAX_FUNCTION_LINES = 60;

/** One import of one module: `to` is a repository-relative path; `typeOnly` for `import type`. */
export interface Import {
  readonly to: string;
  readonly typeOnly: boolean;
}

/** Repository-relative module path → its imports of other modules of the repository. */
export type ImportGraph = ReadonlyMap<string, readonly Import[]>;

/** The folder that names a module's layer (`gateway` for the files at src/'s root, `main`). */
export function unitOf(path: string): string | null {
  if (path === "main.ts") return "main";
  if (/^src\/[^/]+\.ts$/.test(path)) return "gateway";
  const m = /^src\/([^/]+)\//.exec(path);
  return m === null ? null : m[1];
}

/** The layer number of a module (0 = base), or `null` when its folder is in no layer. */
export function layerOf(path: string): number | null {
  const unit = unitOf(path);
  const i = LAYERS.findIndex((names) => unit !== null && names.includes(unit));
  return i < 0 ? null : i;
}

function describe(path: string): string {
  return `${path} (${unitOf(path) ?? "?"}, layer ${layerOf(path) ?? "none"})`;
}

/** Imports that break the layer rule, and modules in no layer, one message each. */
export function layerViolations(graph: ImportGraph): string[] {
  const out: string[] = [];
  for (const [from, imports] of graph) {
    const fromLayer = layerOf(from);
    if (fromLayer === null) {
      out.push(`no layer: ${from} (put its folder into LAYERS and docs/ARCHITECTURE.md)`);
      continue;
    }
    for (const { to, typeOnly } of imports) {
      const toLayer = layerOf(to);
      if (BARRED.get(unitOf(from)!)?.includes(unitOf(to)!)) {
        out.push(`barred import: ${describe(from)} -> ${describe(to)}${typeOnly ? " [type]" : ""}`);
        continue;
      }
      if (toLayer === null || unitOf(to) === unitOf(from) || toLayer < fromLayer) continue;
      const kind = toLayer > fromLayer ? "upward" : "sideways";
      out.push(`${kind} import: ${describe(from)} -> ${describe(to)}${typeOnly ? " [type]" : ""}`);
    }
  }
  return out.sort();
}

/** Strongly connected components with more than one module, or a module importing itself. */
function circles(graph: ImportGraph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  const targets = (v: string) => (graph.get(v) ?? []).map((i) => i.to);
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of targets(v)) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || targets(v).includes(v)) found.push(component.sort());
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return found;
}

/** One concrete loop through a component: `a -> b -> … -> a`. */
function loopThrough(graph: ImportGraph, members: readonly string[]): string {
  const inside = new Set(members);
  const start = members[0];
  const cameFrom = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift()!;
    for (const { to } of graph.get(v) ?? []) {
      if (!inside.has(to)) continue;
      if (to === start) {
        const path = [start];
        for (let at = v; at !== start; at = cameFrom.get(at)!) path.splice(1, 0, at);
        return [...path, start].join(" -> ");
      }
      if (!cameFrom.has(to)) {
        cameFrom.set(to, v);
        queue.push(to);
      }
    }
  }
  return members.join(", ");
}

/** Every cycle of imports (`import type` included), as one concrete loop each. */
export function cycleViolations(graph: ImportGraph): string[] {
  return circles(graph).map((c) => `cycle: ${loopThrough(graph, c)}`).sort();
}

/** A file's name as its readers see it: no folder, no `.ts`, no leading `_`. */
function roomName(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1).replace(/\.ts$/, "").replace(/^_/, "");
}

/** Whether `a` becomes `b` by one character inserted, deleted or replaced. */
function oneEditApart(a: string, b: string): boolean {
  if (Math.abs(a.length - b.length) > 1) return false;
  let i = 0;
  while (i < a.length && a[i] === b[i]) i++;
  const [ra, rb] = [
    a.slice(i + (a.length >= b.length ? 1 : 0)),
    b.slice(i + (b.length >= a.length ? 1 : 0)),
  ];
  return ra === rb;
}

/** The words of a name, singular, in alphabetical order (`blob_headers` → `blob header`). */
function wordsOf(name: string): string {
  return name.split("_").map((w) => w.replace(/s$/, "")).sort().join(" ");
}

/**
 * Pairs of files whose names are a character or a word order apart (`client_queue.ts` and
 * `client_queues.ts`, `header_blob.ts` and `blob_headers.ts`): a reader takes one for the
 * other. The same name in two folders (`v11/records.ts`, `v12/records.ts`) is left alone.
 */
export function nameViolations(paths: readonly string[]): string[] {
  const out: string[] = [];
  const sorted = [...paths].sort();
  for (let i = 0; i < sorted.length; i++) {
    for (let j = i + 1; j < sorted.length; j++) {
      const [a, b] = [roomName(sorted[i]), roomName(sorted[j])];
      if (a === b || (!oneEditApart(a, b) && wordsOf(a) !== wordsOf(b))) continue;
      out.push(`near-twin names: ${sorted[i]} and ${sorted[j]} (name what each holds)`);
    }
  }
  return out;
}

/** What `deno info --json` prints, as far as this check reads it. */
interface DenoInfo {
  readonly modules: readonly {
    readonly specifier: string;
    readonly dependencies?: readonly {
      readonly code?: { readonly specifier?: string };
      readonly type?: { readonly specifier?: string };
    }[];
  }[];
}

/** Adds the repository's modules of one `deno info --json` answer to `graph`. */
export function addDenoInfo(graph: Map<string, Import[]>, info: DenoInfo, rootUrl: string): void {
  // Our code only: main.ts and src/**/*.ts (not deno.json, which config/ reads as data).
  const local = (s: string | undefined) => {
    if (s === undefined || !s.startsWith(rootUrl)) return null;
    const path = s.slice(rootUrl.length);
    return path === "main.ts" || (path.startsWith("src/") && path.endsWith(".ts")) ? path : null;
  };
  for (const m of info.modules) {
    const from = local(m.specifier);
    if (from === null || graph.has(from)) continue;
    const imports: Import[] = [];
    for (const d of m.dependencies ?? []) {
      const code = local(d.code?.specifier);
      const to = code ?? local(d.type?.specifier);
      if (to !== null) imports.push({ to, typeOnly: code === null });
    }
    graph.set(from, imports);
  }
}

function isTestModule(path: string): boolean {
  return /_test\.ts$/.test(path);
}

async function sourceModules(root: string, dir = "src"): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(`${root}/${dir}`)) {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory) out.push(...await sourceModules(root, path));
    else if (e.isFile && path.endsWith(".ts") && !isTestModule(path)) out.push(path);
  }
  return out.sort();
}

async function denoInfo(root: string, module: string): Promise<DenoInfo> {
  const run = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", module],
    cwd: root,
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!run.success) {
    throw new Error(`deno info ${module} failed: ${new TextDecoder().decode(run.stderr)}`);
  }
  return JSON.parse(new TextDecoder().decode(run.stdout));
}

/** The import graph of `main.ts` and every non-test module under `src/`. */
export async function readGraph(root: string): Promise<Map<string, Import[]>> {
  const rootUrl = new URL(`file://${root}/`).href;
  const graph = new Map<string, Import[]>();
  addDenoInfo(graph, await denoInfo(root, "main.ts"), rootUrl);
  for (const path of await sourceModules(root)) {
    if (!graph.has(path)) addDenoInfo(graph, await denoInfo(root, path), rootUrl);
  }
  for (const path of [...graph.keys()]) if (isTestModule(path)) graph.delete(path);
  return graph;
}

/** A function's name and extent, for the size rule. */
export interface FunctionExtent {
  readonly name: string;
  readonly lines: number;
}

/** Files over {@link MAX_FILE_LINES} and functions over {@link MAX_FUNCTION_LINES}. */
export function sizeViolations(
  files: ReadonlyMap<string, { readonly lines: number; readonly functions: FunctionExtent[] }>,
): string[] {
  const out: string[] = [];
  for (const [path, { lines, functions }] of files) {
    if (lines > MAX_FILE_LINES && !LONG_FILES.has(path)) {
      out.push(`long file: ${path} has ${lines} lines (at most ${MAX_FILE_LINES})`);
    }
    for (const f of functions) {
      if (f.lines > MAX_FUNCTION_LINES && !LONG_FUNCTIONS.has(`${path}:${f.name}`)) {
        out.push(
          `long function: ${path}:${f.name} has ${f.lines} lines (at most ${MAX_FUNCTION_LINES})`,
        );
      }
    }
  }
  return out.sort();
}

/** Every function-like node of a module with its line count, via the TypeScript parser. */
async function measure(root: string, path: string) {
  const { default: ts } = await import("typescript");
  const text = await Deno.readTextFile(`${root}/${path}`);
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const functions: FunctionExtent[] = [];
  const lineOf = (pos: number) => file.getLineAndCharacterOfPosition(pos).line;
  const nameOf = (node: import("typescript").Node): string => {
    const named = node as { name?: import("typescript").Node };
    if (named.name !== undefined) return named.name.getText(file);
    if (ts.isConstructorDeclaration(node)) return "constructor";
    const parent = node.parent;
    if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) {
      return parent.name.getText(file);
    }
    if (ts.isPropertyDeclaration(parent)) return parent.name.getText(file);
    return `(anonymous at line ${lineOf(node.getStart(file)) + 1})`;
  };
  const visit = (node: import("typescript").Node) => {
    if (ts.isFunctionLike(node) && (node as { body?: unknown }).body !== undefined) {
      const lines = lineOf(node.getEnd()) - lineOf(node.getStart(file)) + 1;
      functions.push({ name: nameOf(node), lines });
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return { lines: text.split("\n").length - (text.endsWith("\n") ? 1 : 0), functions };
}

async function main(args: readonly string[]): Promise<number> {
  const root = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");
  const graph = await readGraph(root);
  const errors = [
    ...layerViolations(graph),
    ...cycleViolations(graph),
    ...nameViolations(await sourceModules(root)),
  ];
  if (args.includes("--sizes")) {
    const files = new Map<string, Awaited<ReturnType<typeof measure>>>();
    for (const path of await sourceModules(root)) files.set(path, await measure(root, path));
    errors.push(...sizeViolations(files));
  }
  if (errors.length === 0) {
    const imports = [...graph.values()].reduce((n, i) => n + i.length, 0);
    console.log(`layers: ok (${graph.size} modules, ${imports} imports)`);
    return 0;
  }
  for (const e of errors) console.log(e);
  console.log(`layers: ${errors.length} violation(s)`);
  return 1;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
