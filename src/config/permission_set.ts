/**
 * What the Deno permission set `gateway` of deno.json lets the gateway read and write, read
 * from deno.json itself so that messages cannot drift from the set that `deno task start` and
 * the compiled binary (`deno compile -P=gateway`) actually grant.
 *
 * @module
 */
import denoJson from "../../deno.json" with { type: "json" };

const SET = denoJson.permissions.gateway;

/**
 * Where operator files (config, topic map, TLS material, Iggy CA) may live. `./src` is left
 * out: it is there so `deno run` can load the gateway's own modules loaded by URL (the store's
 * worker, the Iggy client), not as a place for an operator's files.
 */
export const READABLE_PLACES: readonly string[] = SET.read.filter((p) =>
  p !== "./src" && !p.startsWith("./src/")
);

/** Where the embedded store may live. */
export const WRITABLE_PLACES: readonly string[] = SET.write;

/** The two kinds of file access the set restricts. */
export type FileAccess = "read" | "write";

/**
 * The one-line answer to a Deno `NotCapable` on `path`: Deno's own advice (`--allow-read`)
 * cannot be followed through `deno task` or the compiled binary, so this names the places the
 * set allows instead. `what` names the file's role, e.g. `config file` or `topic map`.
 */
export function notCapableMessage(access: FileAccess, what: string, path: string): string {
  const places = access === "read" ? READABLE_PLACES : WRITABLE_PLACES;
  return `Cannot ${access} ${what} "${path}": the gateway may ${access} only ${
    places.join(", ")
  } (permission set "gateway" in deno.json); put the file there`;
}
