/**
 * Thin `Deno.serve` adapter: `/health`, `/ready`, `/metrics`.
 *
 * @module
 */
import { bindError } from "../net/bind_error.ts";
import type { Readiness } from "./health.ts";

/** What the HTTP server shows. */
export interface HttpSources {
  readiness(): Readiness;
  metricsText(): string;
  /** Optional extra routes (status page, admin actions); `peer` is the requester's address. */
  extra?(req: Request, url: URL, peer: string): Response | Promise<Response> | null;
  /** Called when the server closes (the console's timer). */
  close?(): void;
}

/** A running HTTP server. */
export interface HttpServer {
  readonly port: number;
  close(): Promise<void>;
}

/** Handles one request (exported for tests without sockets). */
export function handleHttp(req: Request, s: HttpSources, peer = ""): Response | Promise<Response> {
  const url = new URL(req.url);
  // Only the admin actions take POST (`admin.ts`), and each says which methods it takes.
  const admin = url.pathname.startsWith("/admin/");
  if (req.method !== "GET" && req.method !== "HEAD" && !(admin && req.method === "POST")) {
    return new Response("method not allowed\n", { status: 405 });
  }
  switch (url.pathname) {
    case "/health":
      return json(200, { status: "ok" });
    case "/ready": {
      const r = s.readiness();
      return json(r.ready ? 200 : 503, {
        ready: r.ready,
        reasons: r.reasons,
        warnings: r.warnings,
        ...(r.backend ? { backend: r.backend } : {}),
        ...(r.uplink ? { uplink: r.uplink } : {}),
      });
    }
    case "/metrics":
      return new Response(s.metricsText(), {
        headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" },
      });
    default:
      return s.extra?.(req, url, peer) ?? new Response("not found\n", { status: 404 });
  }
}

/**
 * Starts the HTTP server on hostname:port (port 0 = any free port). Throws an OperatorError
 * naming the address when it cannot be bound.
 */
export function serveHttp(hostname: string, port: number, s: HttpSources): HttpServer {
  let server: Deno.HttpServer<Deno.NetAddr>;
  try {
    server = Deno.serve(
      { hostname, port, onListen: () => {} },
      (req, info) => handleHttp(req, s, `${info.remoteAddr.hostname}:${info.remoteAddr.port}`),
    );
  } catch (err) {
    s.close?.();
    throw bindError("HTTP listener", hostname, port, err);
  }
  return {
    port: server.addr.port,
    close() {
      s.close?.();
      // Graceful shutdown waits for idle keep-alive connections (a scraper's, say); bound it.
      const bound = new Promise<void>((r) => setTimeout(r, 500));
      return Promise.race([server.shutdown(), bound]).then(() => {});
    },
  };
}

function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body) + "\n", {
    status,
    headers: { "content-type": "application/json" },
  });
}
