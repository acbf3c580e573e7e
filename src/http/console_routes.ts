/**
 * The HTTP listener's routes beyond health, readiness and metrics: the status page with its
 * `/status.json`, and the admin actions under `/admin/`. The sampling for the page's charts runs
 * from the start; the handlers (the page's HTML, the JSON, the admin actions) are loaded from a
 * URL built at run time on the first request for one of their paths, because `deno run` keeps
 * the source of every module a literal import names for the life of the process. `deno run`
 * needs read access to `./src` for it and what it imports (the `gateway` permission sets grant it), and the
 * compile tasks `--include` `console_handlers.ts`.
 *
 * @module
 */
import { type AdminParts, AdminSource } from "./admin_source.ts";
import type { StatusSource } from "./status_json.ts";
// A type-only import: `deno run` does not load the module for it.
import type * as ConsoleHandlers from "./console_handlers.ts";
import { type ConsoleInputs, ConsoleState } from "./console_state.ts";
import type { History } from "../observe/history.ts";

/** The console's handlers, loaded on first call. */
export function loadConsoleHandlers(): Promise<typeof ConsoleHandlers> {
  return import(new URL("./console_handlers.ts", import.meta.url).href);
}

/** Whether `path` is one the console's handlers answer. */
function isConsolePath(path: string): boolean {
  return path === "/" || path === "/status" || path === "/status.json" ||
    path.startsWith("/admin/");
}

/** What the routes read: the `Gateway` has all of it. */
export type ConsoleParts = StatusSource & AdminParts & ConsoleInputs & {
  readonly config: { readonly http: { readonly admin_token: string } };
};

/**
 * The `extra` hook of `serveHttp` for the gateway `g`, and `close` to end the console's
 * sampling timer with the server. `history`: a ring of another interval (tests).
 */
export function consoleRoutes(g: ConsoleParts, o: { history?: History } = {}): {
  extra(req: Request, url: URL, peer: string): Response | Promise<Response> | null;
  close(): void;
} {
  const admin = new AdminSource(g);
  const access = { token: g.config.http.admin_token };
  const state = new ConsoleState(g, admin, o);
  state.start();
  let handlers: Promise<typeof ConsoleHandlers> | undefined;
  const answer = async (req: Request, url: URL, peer: string): Promise<Response> => {
    const h = await (handlers ??= loadConsoleHandlers());
    return h.handleStatusRoute(url, g, (now) => state.json(now)) ??
      await h.handleAdmin(req, url, admin, access, peer) ??
      new Response("not found\n", { status: 404 });
  };
  return {
    extra: (req, url, peer) => isConsolePath(url.pathname) ? answer(req, url, peer) : null,
    close: () => state.stop(),
  };
}
