/**
 * What a CONNECT asks of its session: a clean session, or a
 * stored one that outlives the connection for `expiryS` seconds offline. MQTT 3.1.1: clean
 * session 0 asks for a stored session whose expiry is `session.expiry_s` (as it is set when
 * the expiry is read, not when the session was stored: `session_expiry.ts`). MQTT 5: the
 * Session Expiry Interval granted in `connect_v5.ts` (capped by `session.max_expiry_s`)
 * becomes `expiryS`, and a value of 0 a clean-at-end session; the stored-session code takes this
 * value and never parses a CONNECT itself.
 *
 * @module
 */
import { ConnackCode } from "../codec/encoder.ts";
import type { ConnectPacket } from "../codec/packets.ts";
import type { GatewayConfig } from "../config/types.ts";
import type { SessionContext } from "./context.ts";
import { type ConnackOutcome, refuseConnect } from "./outcome.ts";
import type { V5Session } from "./v5_session.ts";
import type { SessionRequest } from "./requested_session.ts";

export type { SessionRequest };

/**
 * MQTT 3.1.1: clean session 1 → nothing kept; 0 → resume or create a stored session. MQTT 5
 * (`v5` given): a granted Session Expiry Interval over 0 keeps the session that long offline;
 * with 0 and Clean Start 0 a stored session under the id is still resumed [MQTT-3.2.2-2], and
 * ends when the connection does (expiry 0); without one the session is clean (no record).
 */
export function sessionRequestOf(
  p: ConnectPacket,
  config: GatewayConfig,
  v5: V5Session | null = null,
): SessionRequest {
  if (v5 !== null) {
    const expiryS = v5.sessionExpiry;
    const resumeOnly = expiryS === 0; // nothing would outlive the connection: create nothing
    return {
      store: expiryS > 0 || !p.cleanSession,
      cleanStart: p.cleanSession,
      expiryS,
      resumeOnly,
      mqtt5: true,
    };
  }
  return {
    store: !p.cleanSession,
    cleanStart: p.cleanSession,
    expiryS: config.session.expiry_s,
  };
}

/**
 * A stored session the gateway cannot keep: the log did not answer, or a new one would pass
 * `limits.max_stored_sessions`. CONNACK 3 (server unavailable; MQTT 5: 0x88, or 0x97 when full);
 * counted. Reads records other gateways wrote first, so a client coming from another gateway
 * resumes its session.
 */
export async function refuseStoredSession(
  ctx: Pick<SessionContext, "metrics" | "sessions">,
  clientId: string,
  req: SessionRequest,
): Promise<ConnackOutcome | null> {
  if (!req.store) return null;
  let reason: string | null = null;
  let full = false;
  // The positions of an earlier session under this id, if being deleted now, are gone first.
  await ctx.sessions.forgetter.settled(clientId);
  if (!await ctx.sessions.sync()) {
    reason = "stored sessions are unavailable (the log did not answer)";
  } else if (!req.resumeOnly && (full = ctx.sessions.full(clientId))) {
    reason = "max_stored_sessions reached"; // resuming only takes no new slot
  }
  if (reason === null) return null;
  ctx.metrics.storedSessionsRefused.inc();
  const o = refuseConnect(ConnackCode.SERVER_UNAVAILABLE, reason);
  return full ? { ...o, reasonCode5: 0x97 } : o; // MQTT 5: 0x97 Quota exceeded, else 0x88
}
