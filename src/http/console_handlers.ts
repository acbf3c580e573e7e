/**
 * The console's request handlers (the status page, `/status.json`, the admin actions), loaded by
 * `console_routes.ts` from a URL built at run time on the first request for one of their paths:
 * a gateway nobody looks at does not hold their source.
 *
 * @module
 */
export { handleStatusRoute } from "./status_page.ts";
export { handleAdmin } from "./admin.ts";
