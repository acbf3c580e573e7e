/**
 * Loads the Iggy client (Iggy mode, and forward mode's upstream) from a URL built at run time.
 * `deno run` loads every module a literal `import("…")` names when the process starts, used or
 * not, and keeps its source for the life of the process: an embedded gateway would hold the whole
 * Iggy client's source in memory for nothing. A type-only import is not loaded. The compile tasks
 * `--include` the module, which a compiled binary would otherwise lack; `deno run` needs read
 * access to `./src` for it (the `gateway` permission sets grant it).
 *
 * @module
 */
// A type-only import: `deno run` does not load the module for it.
import type * as IggyClient from "./iggy/mod.ts";

export type { LoginRefusal } from "./iggy/errors.ts";

/** The Iggy client's module, loaded on first call. */
export function loadIggy(): Promise<typeof IggyClient> {
  return import(new URL("./iggy/mod.ts", import.meta.url).href);
}
