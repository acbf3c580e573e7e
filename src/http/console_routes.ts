/**
 * The HTTP listener's routes beyond health, readiness and metrics: the status page with its
 * `/status.json`, and the admin actions under `/admin/`.
 *
 * @module
 */
import { handleAdmin } from "./admin.ts";
import { type AdminParts, AdminSource } from "./admin_source.ts";
import { handleStatusRoute, type StatusSource } from "./status_page.ts";

/** What the routes read: the `Gateway` has all of it. */
export type ConsoleParts = StatusSource & AdminParts & {
  readonly config: { readonly http: { readonly admin_token: string } };
};

/** The `extra` hook of `serveHttp` for the gateway `g`. */
export function consoleRoutes(
  g: ConsoleParts,
): (req: Request, url: URL, peer: string) => Response | Promise<Response> | null {
  const admin = new AdminSource(g);
  const access = { token: g.config.http.admin_token };
  return (req, url, peer) =>
    handleStatusRoute(url, g) ?? handleAdmin(req, url, admin, access, peer);
}
