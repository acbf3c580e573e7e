/**
 * Usage text, made from the command table so that what `--help` shows is what the argument
 * check accepts.
 *
 * @module
 */
import type { CommandSpec, OptionSpec } from "./args.ts";
import { COMMANDS } from "./commands.ts";

/** The program's name in usage lines (the compiled binary's name). */
const PROGRAM = "iggy-mqtt-gateway";

function optionLabel(o: OptionSpec): string {
  return o.kind === "boolean" ? `--${o.name}` : `--${o.name} ${o.value ?? "VALUE"}`;
}

/**
 * `iggy-mqtt-gateway read --stream S --topic T [--partition P] …`; options that exclude each
 * other stand as one choice: `[--config FILE | --map FILE | --env-only]`.
 */
export function synopsis(spec: CommandSpec): string {
  const parts = [PROGRAM, spec.name];
  const shown = new Set<string>();
  for (const o of spec.options) {
    if (shown.has(o.name)) continue;
    const choice = choiceOf(spec, o);
    for (const c of choice) shown.add(c.name);
    const label = choice.map(optionLabel).join(" | ");
    parts.push(o.required ? label : `[${label}]`);
  }
  if (spec.positionals) parts.push(`${spec.positionals.value}…`);
  return parts.join(" ");
}

/**
 * `o` and the options it excludes, when they all exclude each other and nothing else (one
 * choice of several); else `o` alone, its exclusions said by its help and the refusal.
 */
function choiceOf(spec: CommandSpec, o: OptionSpec): OptionSpec[] {
  const group = spec.options.filter((x) => x === o || excludes(spec, o.name, x.name));
  const closed = spec.options.every((x) =>
    group.every((g) => g === x || group.includes(x) !== !excludes(spec, g.name, x.name))
  );
  return closed ? group : [o];
}

function excludes(spec: CommandSpec, a: string, b: string): boolean {
  return (spec.exclusive ?? []).some(([x, y]) => (x === a && y === b) || (x === b && y === a));
}

/** The whole `<command> --help` text. */
export function commandUsage(spec: CommandSpec): string {
  const rows: [string, string][] = spec.options.map((o) => [
    optionLabel(o),
    o.required ? `${o.help} (required${o.unless ? ` without --${o.unless}` : ""})` : o.help,
  ]);
  if (spec.positionals) rows.push([`${spec.positionals.value}…`, spec.positionals.help]);
  rows.push(["-h, --help", "print this help"]);
  return [`Usage: ${synopsis(spec)}`, "", spec.summary, "", "Options:", ...table(rows)].join("\n");
}

/** The top-level `--help` text: every command in one line, and how to get more. */
export function overviewUsage(): string {
  return [
    `Usage: ${PROGRAM} [COMMAND] [OPTIONS]`,
    "",
    "Commands:",
    ...table(COMMANDS.map((c) => [c.name, c.summary])),
    "",
    ...table([
      ["--version", "print the version and the protocol versions"],
      ["-h, --help", "print this help"],
    ]),
    "",
    `"${PROGRAM} COMMAND --help" shows a command's options. From a clone, run them as`,
    '"npx --yes deno@2.9.6 task COMMAND …" (task "start" is "run").',
  ].join("\n");
}

function table(rows: [string, string][]): string[] {
  const width = Math.max(...rows.map(([a]) => a.length));
  return rows.map(([a, b]) => `  ${a.padEnd(width)}  ${b}`);
}
