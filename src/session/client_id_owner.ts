/**
 * Client ids belong to principals. A stored session and a live connection record the
 * principal that made them (its user name; "" for anonymous clients, who are one principal
 * between them); a CONNECT by another principal with the same client id would otherwise
 * resume that session and drain the backlog its owner was meant to get, discard it (clean
 * start), or take the owner's live connection over [MQTT-3.1.4-2]. Such a CONNECT is refused
 * instead (CONNACK 2; MQTT 5 0x85 Client Identifier not valid), counted and logged with both
 * names; the owner's session and connection are untouched.
 *
 * A per-principal rule `client_id_pattern` (a `[[users]]` key, or `auth.client_id_pattern` for
 * every named principal) narrows the ids a principal may use at all: `{username}` in it stands
 * for the principal's name, regex-escaped, e.g. `^{username}-`.
 *
 * @module
 */
import { ConnackCode } from "../codec/encoder.ts";
import type { Principal } from "../log/port.ts";
import type { SessionContext } from "./context.ts";
import { type ConnackOutcome, refuseConnect } from "./outcome.ts";
import type { Registered } from "./registry.ts";
import type { SessionRequest } from "./session_request.ts";
import type { StoredSession } from "./stored_sessions.ts";
import { closeAtTokenExpiry, type ExpiringConnection } from "./token_expiry.ts";

/** The services the claim of a client id uses (the takeover of an older connection included). */
export type ClaimContext = Pick<
  SessionContext,
  "config" | "metrics" | "registry" | "sessions" | "wills" | "deadlines" | "clock" | "logger"
>;

/** The principal a client id belongs to, as recorded: its user name, "" for anonymous. */
export function ownerName(p: Principal): string {
  return p.username;
}

/** `{username}` → the name, escaped for a regular expression (u flag). */
export function clientIdPatternFor(pattern: string, username: string): RegExp {
  const escaped = username.replace(/[\\^$.*+?()[\]{}|/]/g, "\\$&");
  return new RegExp(pattern.replaceAll("{username}", escaped), "u");
}

/**
 * The pattern check at CONNECT: the principal's own `client_id_pattern`, else
 * `auth.client_id_pattern`; anonymous clients are not matched (their bound is
 * `auth.anonymous_sources`). Null when the id may be used.
 */
export function refuseClientIdPattern(
  ctx: Pick<SessionContext, "config" | "metrics">,
  clientId: string,
  principal: Principal,
): ConnackOutcome | null {
  if (principal.username === "") return null;
  const pattern = principal.clientIdPattern ?? ctx.config.auth.client_id_pattern;
  if (pattern === "" || clientIdPatternFor(pattern, principal.username).test(clientId)) {
    return null;
  }
  ctx.metrics.clientIdRefused.inc({ reason: "pattern" });
  const refusal = refuseConnect(
    ConnackCode.IDENTIFIER_REJECTED,
    `client id "${clientId}" does not match client_id_pattern`,
  );
  return { ...refusal, logFields: { principal: principal.username, pattern } };
}

/**
 * The ownership check, right before the session is established (synchronously, so nothing can
 * claim the id in between): the live connection and the stored session under `clientId`, if
 * any, must belong to `principal`. `v5` bounds the MQTT 5 CONNACK's size. A session recorded before owners existed belongs to
 * whoever resumes it first. Null when the CONNECT may take the id.
 */
export function refuseForeignClientId(
  ctx: Pick<SessionContext, "metrics" | "registry" | "sessions">,
  clientId: string,
  principal: Principal,
  v5: { readonly maximumPacketSize?: number } | null,
): ConnackOutcome | null {
  const name = ownerName(principal);
  const live = ctx.registry.ownerOf(clientId);
  const stored = ctx.sessions.ownerOf(clientId);
  const owner = live !== null && live !== name
    ? live
    : stored !== null && stored !== undefined && stored !== name
    ? stored
    : null;
  if (owner === null) return null;
  const what = live === owner ? "live connection" : "stored session";
  ctx.metrics.clientIdRefused.inc({ reason: "owned_by_another" });
  const refusal = refuseConnect(
    ConnackCode.IDENTIFIER_REJECTED,
    `client id "${clientId}" belongs to another principal`,
  );
  const logFields = {
    principal: name === "" ? "(anonymous)" : name,
    owner: owner === "" ? "(anonymous)" : owner,
    held_as: what,
  };
  return { ...refusal, maxPacketSize5: v5?.maximumPacketSize, logFields };
}

/** A CONNECT's claim on its client id: who asks, for which session. */
export interface ClientIdClaim {
  readonly clientId: string;
  readonly principal: Principal;
  readonly session: SessionRequest;
  readonly v5: { readonly maximumPacketSize?: number } | null;
}

/** The id was given: the stored session it opened (null: clean) and whether it was resumed. */
export interface ClaimedClientId {
  readonly session: StoredSession | null;
  readonly present: boolean;
}

/**
 * Gives the claimed client id to `c`, or refuses it ({@link refuseForeignClientId}), in one
 * synchronous step so nothing can claim the id in between: a live connection with the id is
 * taken over [MQTT-3.1.4-2] (it stores its positions and goes offline), a delayed will of the
 * session is settled, then the stored session is opened under the claimant's name. A token's
 * principal holds the id until its token expires: the connection is closed then.
 */
export function claimClientId(
  ctx: ClaimContext,
  c: Registered & ExpiringConnection,
  claim: ClientIdClaim,
): ConnackOutcome | ClaimedClientId {
  const { clientId, principal, session } = claim;
  const refused = refuseForeignClientId(ctx, clientId, principal, claim.v5);
  if (refused !== null) return refused;
  if (ctx.registry.takeOver(clientId, c)) ctx.metrics.takeovers.inc();
  ctx.wills.reconnected(clientId, session.cleanStart); // after takeOver's close()
  const opened = ctx.sessions.open(clientId, session, ownerName(principal));
  closeAtTokenExpiry(ctx, c, principal, clientId);
  return opened;
}
