/**
 * Admin actions on the HTTP listener, under `/admin/`. Reads (GET) are open to whoever reaches
 * the listener, as the status page is; writes (POST) need `Authorization: Bearer <token>` with
 * `http.admin_token` (environment only), even from localhost; with no token configured every
 * write is refused. Every write done is logged with what it did, every one refused with why
 * (rate-limited). A browser page of another origin cannot send the header without a CORS
 * preflight, which this listener never answers, so a token-less form post does nothing either.
 *
 *   GET  /admin/clients                                   connected clients
 *   POST /admin/clients/disconnect?client_id=C[&discard_session=true]
 *   GET  /admin/sessions                                  stored sessions
 *   POST /admin/sessions/drop?client_id=C
 *   GET  /admin/topics                                    local streams, topics, partitions
 *   GET  /admin/log-level   POST /admin/log-level?level=debug|info|warn|error
 *
 * @module
 */
import { type Level, LEVELS } from "../observe/logger.ts";
import type { AdminSource } from "./admin_source.ts";

/** Rows a listing returns at most (`?limit=` asks for fewer); `total` counts them all. */
export const MAX_LISTED = 1000;

/** Who may write, and where refusals and actions are told. */
export interface AdminAccess {
  /** `http.admin_token`; "" refuses every write. */
  readonly token: string;
}

/**
 * Serves `/admin/…`; null for any other path. `peer` is the requester's address, for the log.
 */
export function handleAdmin(
  req: Request,
  url: URL,
  src: AdminSource,
  access: AdminAccess,
  peer = "",
): Promise<Response> | null {
  if (!url.pathname.startsWith("/admin/")) return null;
  const route = ROUTES[url.pathname.slice("/admin/".length)];
  if (route === undefined) return Promise.resolve(json(404, { error: "no such admin action" }));
  const method = req.method === "HEAD" ? "GET" : req.method;
  const action = route[method as "GET" | "POST"];
  if (action === undefined) {
    const allow = Object.keys(route).join(", ");
    return Promise.resolve(json(405, { error: `use ${allow}` }, { allow }));
  }
  const name = `${method} ${url.pathname}`;
  if (method === "POST") {
    const refused = refusal(req, access);
    if (refused !== null) {
      src.logger.limited("warn", "Admin action refused", { action: name, peer, reason: refused });
      return Promise.resolve(json(refused.startsWith("no admin token") ? 403 : 401, {
        error: refused,
      }));
    }
  }
  return Promise.resolve()
    .then(() => action(src, url.searchParams, { name, peer }))
    .catch((err) => json(500, { error: String((err as Error)?.message ?? err) }));
}

/** Why a write is refused, or null when its token is right. */
function refusal(req: Request, access: AdminAccess): string | null {
  if (access.token === "") {
    return "no admin token is configured (IGGY_MQTT_HTTP_ADMIN_TOKEN): write actions are off";
  }
  const header = req.headers.get("authorization") ?? "";
  const given = /^Bearer (.+)$/i.exec(header)?.[1] ?? null;
  if (given === null) return "missing Authorization: Bearer <admin token>";
  return sameText(given, access.token) ? null : "wrong admin token";
}

/** Compares without stopping at the first difference (no timing hint of the token's prefix). */
function sameText(a: string, b: string): boolean {
  const [x, y] = [new TextEncoder().encode(a), new TextEncoder().encode(b)];
  let diff = x.length ^ y.length;
  for (let i = 0; i < Math.max(x.length, y.length); i++) diff |= (x[i] ?? 0) ^ (y[i] ?? 0);
  return diff === 0;
}

interface Call {
  readonly name: string;
  readonly peer: string;
}
type Action = (src: AdminSource, q: URLSearchParams, call: Call) => Response | Promise<Response>;

const ROUTES: Record<string, { GET?: Action; POST?: Action }> = {
  "clients": { GET: (src, q) => listing(src.clients(), q, "clients") },
  "clients/disconnect": { POST: disconnect },
  "sessions": { GET: (src, q) => listing(src.sessions(), q, "sessions") },
  "sessions/drop": { POST: dropSession },
  "topics": { GET: topics },
  "log-level": { GET: (src) => json(200, { level: src.logger.level }), POST: logLevel },
};

function listing(rows: readonly unknown[], q: URLSearchParams, field: string): Response {
  const limit = limitOf(q);
  if (typeof limit === "string") return json(400, { error: limit });
  return json(200, {
    total: rows.length,
    listed: Math.min(limit, rows.length),
    [field]: rows.slice(0, limit),
  });
}

function limitOf(q: URLSearchParams): number | string {
  const raw = q.get("limit");
  if (raw === null) return MAX_LISTED;
  const n = /^\d+$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= 1 && n <= MAX_LISTED)) {
    return `limit must be an integer from 1 to ${MAX_LISTED}, got "${raw}"`;
  }
  return n;
}

function clientIdOf(q: URLSearchParams): string | Response {
  const id = q.get("client_id");
  return id === null || id === "" ? json(400, { error: "client_id is required" }) : id;
}

function disconnect(src: AdminSource, q: URLSearchParams, call: Call): Response {
  const id = clientIdOf(q);
  if (id instanceof Response) return id;
  const discard = q.get("discard_session");
  if (discard !== null && discard !== "true" && discard !== "false") {
    return json(400, { error: `discard_session must be true or false, got "${discard}"` });
  }
  const r = src.disconnect(id, discard === "true");
  if (!r.disconnected) return json(404, { error: `no client "${id}" is connected` });
  src.logger.info("Admin action: client disconnected", {
    client_id: id,
    protocol: r.protocol,
    session_dropped: r.session_dropped,
    peer: call.peer,
  });
  return json(200, { client_id: id, ...r });
}

function dropSession(src: AdminSource, q: URLSearchParams, call: Call): Response {
  const id = clientIdOf(q);
  if (id instanceof Response) return id;
  const r = src.dropSession(id);
  if (r === "none") return json(404, { error: `no stored session of "${id}"` });
  if (r === "connected") {
    return json(409, {
      error: `client "${id}" is connected: disconnect it with discard_session=true`,
    });
  }
  src.logger.info("Admin action: stored session dropped", { client_id: id, peer: call.peer });
  return json(200, { client_id: id, dropped: true });
}

async function topics(src: AdminSource, q: URLSearchParams): Promise<Response> {
  const rows = await src.topics();
  if (rows === null) return json(501, { error: "this backend cannot list its topics" });
  return listing(rows.topics, q, "topics");
}

function logLevel(src: AdminSource, q: URLSearchParams, call: Call): Response {
  const level = q.get("level") ?? "";
  if (!(LEVELS as readonly string[]).includes(level)) {
    return json(400, { error: `level must be one of ${LEVELS.join(", ")}, got "${level}"` });
  }
  const previous = src.logger.level;
  src.logger.setLevel(level as Level);
  // Logged at warn so the change shows whatever the new level is.
  src.logger.warn("Admin action: log level changed", {
    from: previous,
    to: level,
    peer: call.peer,
  });
  return json(200, { level, previous });
}

function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body) + "\n", {
    status,
    headers: { "content-type": "application/json", "cache-control": "no-store", ...headers },
  });
}
