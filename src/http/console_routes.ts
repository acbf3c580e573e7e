/**
 * The HTTP listener's routes beyond health, readiness and metrics: the status page with its
 * `/status.json`, and the admin actions under `/admin/`.
 *
 * @module
 */
import { handleAdmin } from "./admin.ts";
import { type AdminParts, AdminSource } from "./admin_source.ts";
import { handleStatusRoute, type StatusSource } from "./status_page.ts";
import { type ConsoleInputs, ConsoleState } from "./console_state.ts";
import type { History } from "../observe/history.ts";

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
  return {
    extra: (req, url, peer) =>
      handleStatusRoute(url, g, (now) => state.json(now)) ??
        handleAdmin(req, url, admin, access, peer),
    close: () => state.stop(),
  };
}
