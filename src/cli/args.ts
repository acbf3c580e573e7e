/**
 * Command-line arguments checked against a command's own options. node:util `parseArgs` in
 * strict mode throws a TypeError with a stack for an unknown option and knows no integers, so
 * this small parser does both and reports a {@link UsageError} that names the option; main.ts
 * prints it with the command's usage and exits 2.
 *
 * @module
 */

/** What an option takes: nothing, any text, or an integer ≥ 0 (`offset`) or ≥ 1 (`positive`). */
export type OptionKind = "boolean" | "string" | "offset" | "positive";

/** One `--name` option of a command. */
export interface OptionSpec {
  readonly name: string;
  readonly kind: OptionKind;
  /** The value's placeholder in usage text (`FILE`, `S`). */
  readonly value?: string;
  readonly help: string;
  readonly required?: boolean;
  /** A required option is not required when this one is given. */
  readonly unless?: string;
}

/** A command: its options, its positional arguments (if any) and its usage text. */
export interface CommandSpec {
  readonly name: string;
  readonly summary: string;
  readonly options: readonly OptionSpec[];
  /** Positional arguments: their placeholder, help, and how many at least. */
  readonly positionals?: { readonly value: string; readonly help: string; readonly min: number };
  /** Pairs of options that cannot be given together. */
  readonly exclusive?: readonly (readonly [string, string])[];
}

/** A command line the command does not accept; the message names the option at fault. */
export class UsageError extends Error {
  readonly code = "usage";
  /** The command whose usage main.ts prints after the message. */
  readonly spec: CommandSpec;
  constructor(spec: CommandSpec, message: string) {
    super(`${spec.name}: ${message}`);
    this.name = "UsageError";
    this.spec = spec;
  }
}

/** Arguments that passed their command's spec. */
export class ParsedArgs {
  readonly #spec: CommandSpec;
  readonly #values: ReadonlyMap<string, string | number | boolean>;
  /** `--help` or `-h` was given: print usage, do nothing else. */
  readonly help: boolean;
  readonly positionals: readonly string[];

  constructor(
    spec: CommandSpec,
    values: ReadonlyMap<string, string | number | boolean>,
    positionals: readonly string[],
    help: boolean,
  ) {
    this.#spec = spec;
    this.#values = values;
    this.positionals = positionals;
    this.help = help;
  }

  /** A string option's value, or undefined when not given. */
  string(name: string): string | undefined {
    return this.#get(name, ["string"]) as string | undefined;
  }

  /** An integer option's value, or undefined when not given. */
  integer(name: string): number | undefined {
    return this.#get(name, ["offset", "positive"]) as number | undefined;
  }

  /** Whether a boolean option was given. */
  flag(name: string): boolean {
    return (this.#get(name, ["boolean"]) as boolean | undefined) ?? false;
  }

  #get(name: string, kinds: OptionKind[]): string | number | boolean | undefined {
    const option = this.#spec.options.find((o) => o.name === name);
    // A caller asking for an option its command does not declare is a bug, not a usage error.
    if (!option || !kinds.includes(option.kind)) {
      throw new Error(`Command "${this.#spec.name}" has no ${kinds.join("/")} option --${name}`);
    }
    return this.#values.get(name);
  }
}

/**
 * Checks `args` (what follows the command name) against `spec`. `--name value` and
 * `--name=value` are accepted; `--` ends the options. Throws {@link UsageError}.
 */
export function parseCommandArgs(spec: CommandSpec, args: readonly string[]): ParsedArgs {
  const end = args.indexOf("--");
  const optionPart = end === -1 ? args : args.slice(0, end);
  // Help wins over every other problem on the line: whoever asks for it gets it.
  if (optionPart.includes("--help") || optionPart.includes("-h")) {
    return new ParsedArgs(spec, new Map(), [], true);
  }
  const values = new Map<string, string | number | boolean>();
  const positionals: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (i === end) {
      positionals.push(...args.slice(i + 1));
      break;
    }
    if (!arg.startsWith("-") || arg === "-") {
      positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf("=");
    const name = arg.startsWith("--") ? arg.slice(2, eq === -1 ? undefined : eq) : "";
    const option = spec.options.find((o) => o.name === name);
    if (!option) {
      throw new UsageError(spec, `unknown option "${eq === -1 ? arg : arg.slice(0, eq)}"`);
    }
    if (values.has(name)) throw new UsageError(spec, `--${name} is given twice`);
    if (option.kind === "boolean") {
      if (eq !== -1) throw new UsageError(spec, `--${name} takes no value`);
      values.set(name, true);
      continue;
    }
    let raw: string;
    if (eq !== -1) raw = arg.slice(eq + 1);
    else {
      // "--stream --topic t" is a forgotten value, not a stream named "--topic".
      if (i + 1 >= args.length || i + 1 === end || args[i + 1].startsWith("--")) {
        throw new UsageError(spec, `--${name} needs a value (${option.value ?? "VALUE"})`);
      }
      raw = args[++i];
    }
    values.set(name, checkValue(spec, option, raw));
  }
  checkRequired(spec, values);
  for (const [a, b] of spec.exclusive ?? []) {
    if (values.has(a) && values.has(b)) {
      throw new UsageError(spec, `--${a} and --${b} cannot be given together`);
    }
  }
  const p = spec.positionals;
  if (!p && positionals.length > 0) {
    throw new UsageError(spec, `unexpected argument "${positionals[0]}"`);
  }
  if (p && positionals.length < p.min) {
    throw new UsageError(spec, `at least ${p.min === 1 ? "one" : p.min} ${p.value} is required`);
  }
  return new ParsedArgs(spec, values, positionals, false);
}

function checkValue(spec: CommandSpec, option: OptionSpec, raw: string): string | number {
  if (option.kind === "string") {
    if (raw === "") throw new UsageError(spec, `--${option.name} must not be empty`);
    return raw;
  }
  const n = /^\d+$/.test(raw) ? Number(raw) : NaN;
  const min = option.kind === "positive" ? 1 : 0;
  if (!Number.isSafeInteger(n) || n < min) {
    const want = min === 1 ? "a positive integer" : "a non-negative integer";
    throw new UsageError(spec, `--${option.name} must be ${want}, got "${raw}"`);
  }
  return n;
}

/** Every required option is there (unless the option that waives it is). */
function checkRequired(spec: CommandSpec, values: ReadonlyMap<string, unknown>): void {
  for (const o of spec.options) {
    if (o.required && !values.has(o.name) && !(o.unless && values.has(o.unless))) {
      throw new UsageError(spec, `--${o.name} is required`);
    }
  }
}
