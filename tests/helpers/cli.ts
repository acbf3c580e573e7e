/**
 * The CLI as an operator runs it, `deno run -P=gateway main.ts …` in the repository root: the
 * permission set the compiled binary embeds.
 *
 * @module
 */
import { run } from "./gateway.ts";

const DENO = Deno.execPath();

/** The repository root (where deno.json and its permission set `gateway` live). */
export const ROOT = new URL("../../", import.meta.url).pathname;

/** Runs `main.ts` with `args`; `env` is laid over the test's environment. */
export function cli(args: string[], o: { env?: Record<string, string>; stdin?: string } = {}) {
  return run(DENO, ["run", "-P=gateway", "main.ts", ...args], {
    cwd: ROOT,
    env: o.env,
    stdin: o.stdin,
  });
}

/** Deno's colour codes around its own notices. */
const ANSI_COLOUR = new RegExp(String.raw`\x1b\[[0-9;]*m`, "g");

/**
 * What the gateway itself wrote to stderr, as lines: Deno's own notice that permissions in a
 * config file are experimental (printed by `deno run -P`, not by us) and colour codes removed.
 */
export function ownStderrLines(stderr: string): string[] {
  return stderr
    .replace(ANSI_COLOUR, "")
    .split("\n")
    .filter((l) => l !== "" && !l.startsWith("Warning Permissions in the config file"));
}

/** A stack frame line ("    at main (file:///…)"): printed only for bugs. */
export const STACK_FRAME = /^\s+at /m;
