/**
 * CONNECT handling: client-id rules, will policy, authentication with
 * per-source back-off, the will's mapping and ACL check, keep-alive. Returns a value: a refusal
 * (CONNACK code and reason) or the accepted session; the connection applies it (takeover,
 * deadlines, CONNACK 0) and sends what it says.
 *
 * @module
 */
import { ConnackCode } from "../codec/encoder.ts";
import type { ConnectPacket } from "../codec/packets.ts";
import { isControlChar } from "../codec/mqtt_string.ts";
import { utf8Length } from "../base/utf8.ts";
import type { Principal } from "../log/port.ts";
import type { SessionContext } from "./context.ts";
import {
  CONNACK_ACCEPTED,
  type ConnackOutcome,
  type ConnackReturnCode,
  refuseConnect,
} from "./outcome.ts";
import { connackProperties, refuseConnect5, v5SessionOf } from "./connect_v5.ts";
import type { V5Session } from "./v5_session.ts";
import { type HeldWill, refuseWill } from "./will.ts";
import { refuseClientIdPattern } from "./client_id_owner.ts";
import { refuseStoredSession, type SessionRequest, sessionRequestOf } from "./session_request.ts";
import type { LocalClaim } from "./session_claims.ts";

/** The services deciding a CONNECT uses (the will check and the stored-session quota included). */
export type ConnectContext = Pick<
  SessionContext,
  "authenticator" | "config" | "sourceGuard" | "preparer" | "metrics" | "sessions" | "claims"
>;

/** A CONNECT that passed every check: the session to establish. */
export interface AcceptedConnect {
  readonly kind: "accepted";
  readonly clientId: string;
  readonly principal: Principal;
  /** The will to publish if the connection ends without DISCONNECT. */
  readonly will: HeldWill | null;
  /** Silence after which the connection is closed (1.5× the clamped keep-alive). */
  readonly timeoutMs: number;
  /** MQTT 5 session state; null on 3.1.1. */
  readonly v5: V5Session | null;
  /** The CONNACK to send (session present is set when the session is opened). */
  readonly connack: ConnackOutcome;
  /** Clean, or stored and for how long. */
  readonly session: SessionRequest;
  /** Its claim of the client id, read by every gateway on the same Iggy (null: alone). */
  readonly claim: LocalClaim | null;
}

/** What {@link handleConnect} decides. */
export type ConnectResult = AcceptedConnect | ConnackOutcome;

/** What the handler may see of the connection while it waits for authentication. */
export interface ConnectSite {
  /** The peer's address (anonymous rules, back-off, logs). */
  readonly remoteAddress: string;
  /** The name of the peer's verified client certificate, if it presented one. */
  readonly certificateName?: string;
  /** The connection closed meanwhile (deadline, takeover, stop): decide nothing more. */
  readonly closed: boolean;
}

/**
 * Decides a CONNECT. Resolves with null when the connection closed while authentication ran
 * (nothing is to be sent then).
 */
export async function handleConnect(
  ctx: ConnectContext,
  p: ConnectPacket,
  site: ConnectSite,
): Promise<ConnectResult | null> {
  const r = await decideConnect(ctx, p, site);
  const limit = p.properties?.maximumPacketSize;
  return r?.kind === "connack" && limit !== undefined ? { ...r, maxPacketSize5: limit } : r;
}

async function decideConnect(
  ctx: ConnectContext,
  p: ConnectPacket,
  site: ConnectSite,
): Promise<ConnectResult | null> {
  const clientId = assignClientId(p);
  if (typeof clientId !== "string") return clientId;
  const refused = (p.protocolLevel === 5 ? refuseConnect5(p) : null) ?? refuseByPolicy(ctx, p);
  if (refused !== null) return refused;
  const source = site.remoteAddress;
  const decision = await ctx.authenticator.authenticate(p, source, site.certificateName);
  if (site.closed) return null;
  if (!decision.ok) {
    // Repeated failures from one source are slowed down (the connect timeout still applies).
    const delay = decision.connackCode === ConnackCode.BAD_USERNAME_OR_PASSWORD
      ? ctx.sourceGuard.failed(source)
      : 0;
    if (delay > 0) await new Promise((r) => setTimeout(r, delay));
    if (site.closed) return null;
    const refusal = refuseConnect(decision.connackCode as ConnackReturnCode, decision.reason);
    return { ...refusal, logFields: { username: p.username ?? "(none)" } };
  }
  // Proven credentials clear the source's failures (a token may come without a username).
  if (decision.anonymous !== true) ctx.sourceGuard.succeeded(source);
  const badId = refuseClientIdPattern(ctx, clientId, decision.principal);
  if (badId !== null) return badId;
  let will: HeldWill | null = null;
  if (p.will !== null) {
    const why = refuseWill(ctx, p.will, decision.principal);
    if (why !== null) return refuseConnect(ConnackCode.NOT_AUTHORIZED, why);
    will = p.will as HeldWill;
  }
  const maxKeepAlive = ctx.config.limits.max_keep_alive_s;
  const v5 = p.protocolLevel === 5 ? v5SessionOf(ctx.config, p) : null;
  const session = sessionRequestOf(p, ctx.config, v5);
  const taken = await takeSession(ctx, clientId, decision.principal, session, site);
  if (taken === null || "kind" in taken) return taken;
  const accepted = {
    kind: "accepted" as const,
    clientId,
    principal: decision.principal,
    will,
    timeoutMs: keepAliveTimeoutMs(p.keepAliveSeconds, maxKeepAlive),
    v5,
    connack: CONNACK_ACCEPTED,
    session,
    claim: taken.claim,
  };
  if (v5 === null) return accepted;
  const clamped = p.keepAliveSeconds === 0 || p.keepAliveSeconds > maxKeepAlive;
  const properties5 = connackProperties(ctx.config, {
    assignedClientId: p.clientId === "" ? clientId : null,
    serverKeepAlive: clamped ? maxKeepAlive : null,
    requestedSessionExpiry: p.properties?.sessionExpiry ?? 0,
    session: v5,
  });
  return { ...accepted, connack: { ...CONNACK_ACCEPTED, properties5 } };
}

/**
 * The session asked for: refused when it cannot be stored; else, in Iggy mode, claimed for every
 * gateway to read (a stored session held through another gateway is released first). Null: the
 * connection closed meanwhile.
 */
async function takeSession(
  ctx: ConnectContext,
  clientId: string,
  principal: Principal,
  session: SessionRequest,
  site: ConnectSite,
): Promise<ConnackOutcome | { readonly claim: LocalClaim | null } | null> {
  const noRoom = await refuseStoredSession(ctx, clientId, session);
  if (site.closed) return null;
  if (noRoom !== null) return noRoom;
  const claim = ctx.claims ? await ctx.claims.announce(clientId, principal, session) : null;
  return site.closed ? null : { claim };
}

/** The client id to use, or the refusal [MQTT-3.1.3-6], [MQTT-3.1.3-8]. */
function assignClientId(p: ConnectPacket): string | ConnackOutcome {
  let clientId = p.clientId;
  if (clientId === "") {
    // [MQTT-3.1.3-8] an empty id needs a clean session; [MQTT-3.1.3-6] we then assign one.
    // MQTT 5 assigns one whatever Clean Start says (and tells it in the CONNACK).
    if (!p.cleanSession && p.protocolLevel !== 5) {
      return refuseConnect(ConnackCode.IDENTIFIER_REJECTED, "empty client id");
    }
    clientId = `auto-${crypto.randomUUID()}`;
  }
  if (isForbiddenClientId(clientId) || utf8Length(clientId) > 255) {
    return refuseConnect(
      ConnackCode.IDENTIFIER_REJECTED,
      "client id has forbidden characters or is too long",
    );
  }
  return clientId;
}

/** Client ids with wildcards or control characters get CONNACK 2 (they travel in headers). */
function isForbiddenClientId(id: string): boolean {
  for (let i = 0; i < id.length; i++) {
    const c = id.charCodeAt(i);
    if (c === 0x23 || c === 0x2b || isControlChar(c)) return true;
  }
  return false;
}

/** The will policy, before any backend call: `session.will = refuse`. */
function refuseByPolicy(ctx: ConnectContext, p: ConnectPacket): ConnackOutcome | null {
  if (p.will !== null && ctx.config.session.will === "refuse") {
    return refuseConnect(
      ConnackCode.NOT_AUTHORIZED,
      "will messages are not accepted (session.will)",
    );
  }
  return null;
}

/** Keep-alive: 0 (none) or above the cap is clamped to the cap; 1.5× grace [MQTT-3.1.2-24]. */
export function keepAliveTimeoutMs(keepAliveSeconds: number, maxSeconds: number): number {
  const ka = keepAliveSeconds === 0 || keepAliveSeconds > maxSeconds
    ? maxSeconds
    : keepAliveSeconds;
  return ka * 1500;
}
