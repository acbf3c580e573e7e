/**
 * The status page for people: `GET /` serves one self-contained HTML page (inline CSS and JS,
 * no external assets; its Content-Security-Policy forbids any) that polls `GET /status.json`
 * every second and draws the gateway at a glance: whether it is ready, the uplink, the store's
 * fill, connections and clients, rates now and charts of the last 15 minutes (inline SVG),
 * stored sessions, the retained set, share groups, readers and the topic map. Plain words on the
 * page; the design's words in tooltips.
 *
 * @module
 */
import { statusJson, type StatusSource } from "./status_json.ts";
import { renderStatusPage } from "./status_page_html.ts";

export {
  clockJson,
  type CounterReading,
  OUTCOMES,
  type ReaderReading,
  type ShareReading,
  statusJson,
  type StatusSource,
} from "./status_json.ts";
export { renderStatusPage } from "./status_page_html.ts";

/** No external assets, no frames, no form posts: only same-origin fetches of status.json. */
const CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; " +
  "connect-src 'self'; img-src 'none'; base-uri 'none'; form-action 'none'; " +
  "frame-ancestors 'none'";

/**
 * Serves `/` (the page) and `/status.json`; `null` for any other path, so it plugs into the
 * `extra` hook of `serveHttp`.
 */
export function handleStatusRoute(
  url: URL,
  g: StatusSource,
  more?: (now: number) => Record<string, unknown>,
): Response | null {
  if (url.pathname === "/" || url.pathname === "/status") {
    return new Response(renderStatusPage(), {
      headers: {
        "content-type": "text/html; charset=utf-8",
        "cache-control": "no-store",
        "content-security-policy": CSP,
        "x-content-type-options": "nosniff",
      },
    });
  }
  if (url.pathname === "/status.json") {
    const now = Date.now();
    const body = { ...(statusJson(g, now) as Record<string, unknown>), ...more?.(now) };
    return new Response(JSON.stringify(body) + "\n", {
      headers: { "content-type": "application/json", "cache-control": "no-store" },
    });
  }
  return null;
}
