/**
 * A connection that logged in with a token is closed when the token stops being valid (its
 * `exp` plus `auth.jwt_leeway_s`): an MQTT 5 client is told with DISCONNECT 0xA0 (Maximum
 * connect time) first. The deadline goes on the gateway's one deadline wheel, holding the
 * connection weakly: a connection that closed sooner is not kept for the token's lifetime,
 * only this small entry is, until its time comes.
 *
 * @module
 */
import type { Principal } from "../log/port.ts";
import type { SessionContext } from "./context.ts";
import type { Registered } from "./registry.ts";
import type { TokenPrincipal } from "./token_login.ts";

/** MQTT 5 DISCONNECT reason: Maximum connect time. */
export const MAXIMUM_CONNECT_TIME = 0xa0;

/** A connection as the deadline sees it: `closed` once it has closed (Connection has it). */
export type ExpiringConnection = Registered & { readonly closed?: boolean };

/** Closes `c` when its principal's token expires; nothing for a principal without a token. */
export function closeAtTokenExpiry(
  ctx: Pick<SessionContext, "deadlines" | "clock" | "logger">,
  c: ExpiringConnection,
  principal: Principal,
  clientId: string,
  wallNow: number = Date.now(),
): void {
  const until = (principal as Partial<TokenPrincipal>).tokenValidUntilMs;
  if (until === undefined) return;
  const held = new WeakRef(c);
  ctx.deadlines.add({
    lastActivity: ctx.clock.now(),
    // At least 1 ms: a deadline of 0 is no deadline, and a token may lapse during the CONNECT.
    timeoutMs: Math.max(1, until - wallNow),
    expire() {
      const conn = held.deref();
      if (conn === undefined || conn.closed === true) return;
      ctx.logger.limited("info", "Closing connection: its login token expired", {
        client_id: clientId,
        principal: principal.username,
      });
      if (conn.disconnect !== undefined) conn.disconnect(MAXIMUM_CONNECT_TIME, "token expired");
      else conn.close("token expired");
    },
  });
}
