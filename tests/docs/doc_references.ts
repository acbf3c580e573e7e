/**
 * What the docs cite and whether it exists: config keys (`table.key`), `IGGY_MQTT_*` names,
 * metric names, options of the gateway's commands, `deno task` names, repository paths and
 * relative links with their anchors. The extraction is plain text work over Markdown (or a
 * commented TOML file); what exists comes from the code itself (the schema, the command table,
 * deno.json, the metric registrations in src/, the file tree), so neither side is a second list.
 *
 * @module
 */

/** What kind of name a doc cites. */
export type CitedKind =
  | "key"
  | "env"
  | "metric"
  | "option"
  | "task"
  | "path"
  | "file"
  | "link";

/** One name a doc cites, and where. */
export interface Citation {
  readonly kind: CitedKind;
  /** The name as checked: `limits.max_packet_bytes`, `--json`, `src/gateway.ts`, … */
  readonly name: string;
  /** Options: the command they were given to (`run`, `check`, …). */
  readonly command?: string;
  readonly line: number;
}

/** A piece of a doc's text: an inline code span, a line of a fenced block, or a prose line. */
interface Piece {
  readonly text: string;
  readonly line: number;
  readonly kind: "span" | "code" | "prose";
}

/**
 * Splits Markdown into inline code spans, fenced code lines and prose lines (prose without its
 * spans). A `.toml` or `.service` file is all comments and code: its `#` lines are prose.
 */
export function piecesOf(text: string, markdown = true): Piece[] {
  const pieces: Piece[] = [];
  let fenced = false;
  text.split("\n").forEach((raw, i) => {
    const line = i + 1;
    if (markdown && /^\s*```/.test(raw)) {
      fenced = !fenced;
      return;
    }
    if (!markdown) {
      const comment = raw.match(/^\s*#(.*)$/);
      if (comment === null) return void pieces.push({ text: raw, line, kind: "code" });
      raw = comment[1];
    } else if (fenced) return void pieces.push({ text: raw, line, kind: "code" });
    // Inline spans: `…` (a table's `\|` stays inside its span).
    const prose = raw.replace(/`([^`]+)`/g, (_, span: string) => {
      pieces.push({ text: span.replaceAll("\\|", "|"), line, kind: "span" });
      return " ";
    });
    pieces.push({ text: prose, line, kind: "prose" });
  });
  return pieces;
}

/** What the extraction needs to know of the code: the tables and the tasks' command lines. */
export interface CiteContext {
  /** Config tables (`gateway`, `limits`, …): `x.y` counts as a key only when `x` is one. */
  readonly tables: ReadonlySet<string>;
  /** deno.json's tasks: name → command line (a task that runs `main.ts CMD` passes options to CMD). */
  readonly tasks: Readonly<Record<string, string>>;
  /** The gateway's command names. */
  readonly commands: ReadonlySet<string>;
  /** Top-level folders of the repository whose paths are checked (`src`, `tests`, …). */
  readonly roots: ReadonlySet<string>;
  /** Folders of src/: ARCHITECTURE names files relative to src/ (`net/ws_listener.ts`). */
  readonly srcFolders: ReadonlySet<string>;
}

/** File name endings that make `gateway.toml` a file, not the key `toml` of `[gateway]`. */
const FILE_ENDINGS = new Set(["toml", "db", "env", "ts", "json", "md", "service", "pem", "key"]);

/** Prefixes of the gateway's metric names (`/metrics`). */
const METRIC_PREFIX = /^(mqtt|iggy|forward|reader|session|replay|log|ledger)_/;

/**
 * A line that shows the gateway's answer to a mistyped name ("…; did you mean X?") cites the
 * mistyped name on purpose: its keys and environment names are not checked.
 */
const MISTYPED_EXAMPLE = /did you mean/i;

/** Every name `text` cites; `markdown` false reads a commented config file. */
export function citationsOf(text: string, ctx: CiteContext, markdown = true): Citation[] {
  const out: Citation[] = [];
  const lines = text.split("\n");
  for (const p of piecesOf(text, markdown)) {
    const example = MISTYPED_EXAMPLE.test(lines[p.line - 1]);
    const add = (kind: CitedKind, name: string, command?: string) =>
      out.push(
        command === undefined
          ? { kind, name, line: p.line }
          : { kind, name, command, line: p.line },
      );
    if (!example) envNames(p.text).forEach((n) => add("env", n));
    paths(p.text, ctx).forEach((n) => add("path", n));
    if (markdown && p.kind === "prose") links(p.text).forEach((n) => add("link", n));
    if (p.kind === "prose") {
      for (const m of p.text.matchAll(/(?<![\w.])([a-z][a-z0-9_]*_total)\b/g)) add("metric", m[1]);
      continue;
    }
    if (p.kind === "span") {
      if (!example) keys(p.text, ctx).forEach((k) => add("key", k));
      // A module named alone (`settled.ts`, in a folder's table row): some file has that name.
      for (const m of p.text.matchAll(/(?<![\w./*-])([a-z_][a-z0-9_]*\.ts)(?![\w/-])/g)) {
        add("file", m[1]);
      }
      const metric = p.text.match(/^([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(\{.*\})?$/);
      if (metric !== null && METRIC_PREFIX.test(metric[1])) add("metric", metric[1]);
    }
    for (const c of commandLines(p.text, p.kind, ctx)) {
      if (c.task !== undefined) add("task", c.task);
      for (const o of c.options) add("option", o, c.command ?? "");
    }
  }
  return out;
}

/** `IGGY_MQTT_…` names (not the `IGGY_MQTT_*` pattern nor `IGGY_MQTT_<TABLE>_<KEY>`). */
function envNames(text: string): string[] {
  return [...text.matchAll(/\bIGGY_MQTT_[A-Z0-9][A-Z0-9_]*\b(?![*<])/g)].map((m) => m[0]);
}

/** `table.key` where `table` is a config table; `table.key_*` is cited as a prefix `table.key_*`. */
function keys(span: string, ctx: CiteContext): string[] {
  const found: string[] = [];
  for (
    const m of span.matchAll(
      /(?<![\w./-])([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)(\*?)(?![\w/-]|\.\w)/g,
    )
  ) {
    if (!ctx.tables.has(m[1]) || FILE_ENDINGS.has(m[2])) continue;
    found.push(`${m[1]}.${m[2]}${m[3]}`);
  }
  return found;
}

/** Repository paths: `src/…`, `tests/…`, …, and src-relative ones (`net/listeners.ts`). */
function paths(text: string, ctx: CiteContext): string[] {
  const found: string[] = [];
  for (const m of text.matchAll(/(?<![\w./$-])([a-z_.][\w.-]*)\/([\w./*-]*[\w*/])/g)) {
    const [, first, rest] = m;
    // `config/files.ts` in ARCHITECTURE is src/config/files.ts: the folder names clash.
    if (ctx.roots.has(first) && ctx.srcFolders.has(first) && /\.ts$/.test(rest)) {
      found.push(`${first}/${rest}|src/${first}/${rest}`);
    } else if (ctx.roots.has(first)) found.push(`${first}/${rest}`);
    else if (ctx.srcFolders.has(first) && /\.ts$/.test(rest)) found.push(`src/${first}/${rest}`);
  }
  return found;
}

/** Relative Markdown link targets (`[x](OPERATIONS.md#reload-sighup)`, `[x](#reload-sighup)`). */
function links(text: string): string[] {
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)]
    .map((m) => m[1])
    .filter((t) => !/^[a-z]+:/.test(t));
}

/** A command line found in a span or code line: the task it runs and the options it gives. */
interface CommandLine {
  readonly task?: string;
  /** The gateway's command the options go to; undefined when they go to something else. */
  readonly command?: string;
  readonly options: readonly string[];
}

/**
 * Command lines in one span or code line, cut at `|`, `&&`, `;` and `#`: `deno task X …`
 * (options checked when X runs `main.ts CMD`), `iggy-mqtt-gateway[-build] [CMD] …`,
 * `main.ts CMD …`, and a span that starts with a command name (`read --json`).
 */
function commandLines(text: string, kind: Piece["kind"], ctx: CiteContext): CommandLine[] {
  const found: CommandLine[] = [];
  const segments = kind === "span" ? text.split(/\s(?:&&|;)\s/) : text.split(/\s(?:\||&&|;|#)\s?/);
  for (const segment of segments) {
    const words = segment.trim().split(/\s+/).filter((w) => w !== "");
    // Options in usage brackets count too: `run [--config F]`.
    const options = (from: number) =>
      [...words.slice(from).join(" ").matchAll(/(?<![\w-])--[a-z][a-z0-9-]*/g)].map((m) => m[0]);
    if (kind === "span" && ctx.commands.has(words[0] ?? "")) {
      found.push({ command: words[0], options: options(1) });
      continue;
    }
    for (let i = 0; i < words.length; i++) {
      const w = words[i];
      const next2 = words[i + 2] ?? "";
      if (/^deno(@[\d.]+)?$/.test(w) && words[i + 1] === "task" && /^[a-z]/.test(next2)) {
        const task = next2;
        const runs = ctx.tasks[task]?.match(/\bmain\.ts ([a-z-]+)/)?.[1];
        found.push({ task, command: runs, options: runs === undefined ? [] : options(i + 3) });
        break;
      }
      const base = w.replace(/^.*\//, "");
      const binary = /^iggy-mqtt-gateway(-[\w$-]+)?$/.test(base) &&
        (i === 0 || w.includes("/") || /^(sudo|env|exec)$|^[A-Z_][A-Z0-9_]*=/.test(words[i - 1]));
      if (binary || base === "main.ts") {
        const next = words[i + 1];
        if (next === undefined) break;
        if (next.startsWith("--")) found.push({ command: "", options: options(i + 1) });
        else if (ctx.commands.has(next)) found.push({ command: next, options: options(i + 2) });
        break;
      }
    }
  }
  return found;
}

/** What exists, from the code. */
export interface Known {
  readonly keys: ReadonlySet<string>;
  /**
   * Dotted names the code writes that share a table's name (Iggy headers `mqtt5.content_type`,
   * user properties `iggy.offset`, span names `log.append`): string literals of src/.
   */
  readonly codeNames: ReadonlySet<string>;
  readonly envNames: ReadonlySet<string>;
  readonly metrics: ReadonlySet<string>;
  /** Histograms: `_bucket`, `_sum` and `_count` series exist for each. */
  readonly histograms: ReadonlySet<string>;
  /** Options per command; "" = options given before any command (`--version`, `--help`). */
  readonly options: ReadonlyMap<string, ReadonlySet<string>>;
  readonly tasks: ReadonlySet<string>;
  /** The names of the repository's TypeScript files (`settled.ts`). */
  readonly fileNames: ReadonlySet<string>;
  /** Whether a repository path (file or folder; `*` matches within a name) exists. */
  readonly exists: (path: string) => boolean;
  /** Anchors (GitHub heading slugs) of a doc, by its repository path; null if not a doc read. */
  readonly anchors: (path: string) => ReadonlySet<string> | null;
}

/** One line per citation of `file` that names nothing that exists. */
export function problemsOf(file: string, cited: readonly Citation[], known: Known): string[] {
  const problems: string[] = [];
  for (const c of cited) {
    const why = problemOf(file, c, known);
    if (why !== null) problems.push(`${file}:${c.line}: ${why}`);
  }
  return problems;
}

function problemOf(file: string, c: Citation, known: Known): string | null {
  switch (c.kind) {
    case "key":
      if (c.name.endsWith("*")) {
        const prefix = c.name.slice(0, -1);
        return [...known.keys].some((k) => k.startsWith(prefix))
          ? null
          : `no config key starts with "${prefix}"`;
      }
      if (known.keys.has(c.name) || known.codeNames.has(c.name)) return null;
      if ([...known.codeNames].some((n) => n.startsWith(`${c.name}.`))) return null;
      return `no config key "${c.name}" (src/config/schema.ts)`;
    case "env":
      return known.envNames.has(c.name) ? null : `no config key has the environment name ${c.name}`;
    case "metric": {
      const base = c.name.replace(/_(bucket|sum|count)$/, "");
      if (known.metrics.has(c.name) || known.histograms.has(base)) return null;
      return `no metric "${c.name}" is registered in src/`;
    }
    case "option": {
      const options = known.options.get(c.command ?? "");
      if (options === undefined) return `no command "${c.command}"`;
      return options.has(c.name) ? null : `${c.command || "the gateway"} takes no option ${c.name}`;
    }
    case "task":
      return known.tasks.has(c.name) ? null : `no task "${c.name}" in deno.json`;
    case "path": {
      const either = c.name.split("|");
      return either.some(known.exists) ? null : `no file or folder ${either.join(" nor ")}`;
    }
    case "file":
      return known.fileNames.has(c.name) ? null : `no file named ${c.name}`;
    case "link":
      return linkProblem(file, c.name, known);
  }
}

/** A relative link's file must exist, and its anchor must be a heading of the doc it points to. */
function linkProblem(file: string, target: string, known: Known): string | null {
  const [path, anchor] = target.split("#", 2);
  const resolved = path === "" ? file : joinPath(file, path);
  if (!known.exists(resolved)) return `link to ${target}: no file ${resolved}`;
  if (anchor === undefined) return null;
  const anchors = known.anchors(resolved);
  if (anchors === null || anchors.has(anchor)) return null;
  return `link to ${target}: ${resolved} has no heading #${anchor}`;
}

/** `path` relative to the folder of `from` (both repository paths). */
function joinPath(from: string, path: string): string {
  const parts = from.split("/").slice(0, -1);
  for (const p of path.split("/")) {
    if (p === "..") parts.pop();
    else if (p !== "." && p !== "") parts.push(p);
  }
  return parts.join("/");
}

/** GitHub's anchor for each heading of a Markdown doc. */
export function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  let fenced = false;
  for (const line of markdown.split("\n")) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    const h = !fenced && line.match(/^#{1,6}\s+(.*)$/);
    if (!h) continue;
    anchors.add(
      h[1].trim().toLowerCase().replace(/`/g, "").replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(
        /\s/g,
        "-",
      ),
    );
  }
  return anchors;
}

/**
 * The metric names registered in one source file: the first argument of `.counter(`,
 * `.gauge(` and `.histogram(`, the second of `tripleGauge(`, and the `name:` entries of a
 * counter table. `dynamic` lists the registrations whose name is not a literal, so a caller
 * can require that each is one it knows to pass literals through.
 */
export function registeredMetrics(source: string): {
  names: string[];
  histograms: string[];
  dynamic: string[];
} {
  const names: string[] = [];
  const histograms: string[] = [];
  const dynamic: string[] = [];
  for (const m of source.matchAll(/\.(counter|gauge|histogram)\(\s*([^\s,)]+)/g)) {
    const literal = m[2].match(/^"([a-z][a-z0-9_]*)"$/);
    if (literal === null) dynamic.push(`.${m[1]}(${m[2]}`);
    else {
      names.push(literal[1]);
      if (m[1] === "histogram") histograms.push(literal[1]);
    }
  }
  for (const m of source.matchAll(/\btripleGauge\(\s*\w+,\s*([^\s,)]+)/g)) {
    const literal = m[1].match(/^"([a-z][a-z0-9_]*)"$/);
    if (literal === null) dynamic.push(`tripleGauge(…, ${m[1]}`);
    else names.push(literal[1]);
  }
  // A table of counters registered by a loop (`registry.counter(name, help)`): its names.
  if (dynamic.includes(".counter(name")) {
    for (const m of source.matchAll(/^\s+name:\s*"([a-z][a-z0-9]*_[a-z0-9_]+)",?$/gm)) {
      names.push(m[1]);
    }
  }
  return { names, histograms, dynamic };
}

/** Dotted string literals of one source file (`"mqtt5.content_type"`, `"mqtt5.user."`). */
export function dottedLiterals(source: string): string[] {
  return [...source.matchAll(/"([a-z][a-z0-9_]*\.[a-z0-9_.]+)"/g)].map((m) => m[1]);
}
