/**
 * A login to the Iggy of `[iggy]` through the gateway's own client and its connect path, for
 * `check` and `read --upstream`: an open backend, or an {@link OperatorError} whose one line
 * names the key to fix.
 *
 * @module
 */
import { OperatorError } from "../config/errors.ts";
import { envNameOf } from "../config/schema.ts";
import type { GatewayConfig } from "../config/types.ts";
import { loadIggy, type LoginRefusal } from "../log/load_iggy.ts";
import type { LogBackend } from "../log/port.ts";

/** An open Iggy backend on `[iggy]`, or the one line that says which key to fix. */
export async function logIn(config: GatewayConfig): Promise<LogBackend> {
  const { IggyBackend, loginRefusalOf } = await loadIggy();
  const auth = { patUsername: config.auth.pat_username, cacheTtlMs: config.auth.cache_ttl_ms };
  const iggy = new IggyBackend(config.iggy, auth);
  try {
    await iggy.open();
    return iggy;
  } catch (err) {
    await iggy.close().catch(() => {});
    throw new OperatorError("login_failed", loginFailure(config, loginRefusalOf(err), err), {
      cause: err,
    });
  }
}

/** `iggy.password (IGGY_MQTT_IGGY_PASSWORD)`. */
function keyNamed(key: string): string {
  return `${key} (${envNameOf(key)})`;
}

/** The one line of a failed login: what Iggy said, and the keys that decide it. */
function loginFailure(config: GatewayConfig, refusal: LoginRefusal | null, err: unknown): string {
  const where = `Iggy at ${config.iggy.address}`;
  switch (refusal) {
    case "credentials":
      return `${where} refused the login of user "${config.iggy.username}": invalid credentials; check ${
        keyNamed("iggy.password")
      } and ${keyNamed("iggy.username")}`;
    case "token":
      return `${where} refused the personal access token; check ${keyNamed("iggy.token")}`;
    case "user_inactive":
      return `${where} refused the login: user "${config.iggy.username}" is inactive; check ${
        keyNamed("iggy.username")
      }`;
    case "protocol":
      return `${where} refused the login: ${innermost(err)}; check ${keyNamed("iggy.protocol")}`;
  }
  const tls = config.iggy.tls ? ", iggy.tls_ca_file, iggy.tls_server_name" : "";
  // The client's "Iggy at … unreachable: …" names the node already.
  const reason = innermost(err);
  const what = reason.startsWith("Iggy at ") ? reason : `Cannot log in to ${where}: ${reason}`;
  return `${what}; check ${
    keyNamed("iggy.address")
  }${tls}, or run check --offline to skip logging in`;
}

/** The client's own words: the error the backend's "Cannot connect to …" wraps. */
function innermost(err: unknown): string {
  const e = err instanceof Error && err.cause instanceof Error ? err.cause : err;
  return e instanceof Error ? e.message : String(e);
}
