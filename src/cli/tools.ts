/**
 * The commands other than `run` (the checks of `check`, `explain`, `read`, the admin commands,
 * `--version`),
 * loaded by `main.ts` from a URL built at run time when one of them runs: `deno run` keeps the
 * source of every module a literal import names for the life of the process, and a running
 * gateway needs none of these. `deno run` needs read access to `./src` for it and what it imports (the `gateway`
 * permission sets grant it), and the compile tasks `--include` this module.
 *
 * @module
 */
export { readMessages, readRetained } from "./read.ts";
export { runAdminCommand } from "./admin_commands.ts";
export { explain } from "./explain.ts";
export { configFileLines } from "./check_files.ts";
export { iggyLines } from "./check_iggy.ts";
export { storeDiskLines } from "./check_store.ts";
export { versionLine } from "./version_line.ts";
