/**
 * The admin commands (`clients`, `disconnect`, `sessions`, `drop-session`, `topics`,
 * `log-level`): each is one request to the running gateway's HTTP listener (`/admin/…`,
 * `src/http/admin.ts`), at `--url` or at `listeners.http` of the config. Write actions send
 * `http.admin_token` (IGGY_MQTT_HTTP_ADMIN_TOKEN) as a bearer token. What goes wrong (no
 * gateway there, a refusal) is one line.
 *
 * @module
 */
import { OperatorError } from "../config/errors.ts";
import { parseAddress } from "../config/load.ts";
import type { GatewayConfig } from "../config/types.ts";

/** Where the gateway is and what to send it. */
export interface AdminTarget {
  /** `http://host:port`, no trailing slash. */
  readonly base: string;
  readonly token: string;
}

/** The gateway's admin base URL: `--url`, or the config's `listeners.http` (a wildcard host: localhost). */
export function adminTarget(config: GatewayConfig, url: string | undefined): AdminTarget {
  const token = config.http.admin_token;
  if (url !== undefined) return { base: url.replace(/\/+$/, ""), token };
  if (config.listeners.http === "") {
    throw new OperatorError(
      "unreachable",
      'listeners.http is "" (the HTTP listener is off): admin commands need it, or --url',
    );
  }
  const a = parseAddress("listeners.http", config.listeners.http);
  const wildcard = a.hostname === "0.0.0.0" || a.hostname === "::" || a.hostname === "[::]";
  const host = wildcard
    ? "127.0.0.1"
    : a.hostname.includes(":") && !a.hostname.startsWith("[")
    ? `[${a.hostname}]`
    : a.hostname;
  return { base: `http://${host}:${a.port}`, token };
}

/**
 * Sends one admin request and returns its JSON body; a refusal (any status but 200) or an
 * unreachable gateway is an {@link OperatorError} with the gateway's own reason.
 */
export async function adminCall(
  t: AdminTarget,
  method: "GET" | "POST",
  path: string,
  query: Record<string, string> = {},
): Promise<Record<string, unknown>> {
  const url = `${t.base}/admin/${path}${
    Object.keys(query).length > 0 ? `?${new URLSearchParams(query)}` : ""
  }`;
  const headers: Record<string, string> = {};
  if (method === "POST" && t.token !== "") headers.authorization = `Bearer ${t.token}`;
  let res: Response;
  try {
    res = await fetch(url, { method, headers, signal: AbortSignal.timeout(10_000) });
  } catch (err) {
    const why = (err as Error)?.message ?? String(err);
    throw new OperatorError("unreachable", `Cannot reach the gateway at ${t.base}: ${why}`);
  }
  const text = await res.text();
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(text);
  } catch {
    throw new OperatorError(
      "admin_refused",
      `${method} ${url}: HTTP ${res.status} (not a gateway's admin answer: ${text.slice(0, 80)})`,
    );
  }
  if (res.status !== 200) {
    throw new OperatorError("admin_refused", `${path}: ${body.error ?? `HTTP ${res.status}`}`);
  }
  return body;
}
