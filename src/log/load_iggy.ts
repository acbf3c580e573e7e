/**
 * Loads the Iggy client (Iggy mode, and forward mode's upstream) from a URL built at run time.
 * `deno run` reads every module a literal `import("…")` names when the process starts, used or
 * not, and keeps its source for the life of the process (a type-only import too): an embedded
 * gateway would hold the whole Iggy client's source in memory for nothing. So its type is declared here, not imported; `load_iggy_test.ts`
 * checks the real module against it, and the compile tasks `--include` the module, which a
 * compiled binary would otherwise lack. `deno run` needs read access to `./src` for it (the
 * `gateway` permission sets grant it).
 *
 * @module
 */
import type { GatewayConfig } from "../config/types.ts";
import type { Logger } from "../observe/logger.ts";
import type { LogBackend } from "./port.ts";

/**
 * What refused a login to Iggy: the username and password, the personal access token, the user
 * (inactive), the protocol version.
 */
export type LoginRefusal = "credentials" | "token" | "user_inactive" | "protocol";

/** What this loader uses of `iggy/mod.ts`. */
export interface IggyModule {
  readonly IggyBackend: new (
    config: GatewayConfig["iggy"],
    auth: { patUsername: string; cacheTtlMs: number },
    deps?: { logger?: Logger; maxMessageBytes?: number },
  ) => LogBackend;
  /** What refused the login, from an error of `open()`; null when nothing did (unreachable). */
  readonly loginRefusalOf: (e: unknown) => LoginRefusal | null;
}

/** The Iggy client's module, loaded on first call. */
export function loadIggy(): Promise<IggyModule> {
  return import(new URL("./iggy/mod.ts", import.meta.url).href);
}
