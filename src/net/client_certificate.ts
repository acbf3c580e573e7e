/**
 * Client certificates on the TLS listener (`listeners.tls_client_auth`): which name of a
 * verified certificate is the principal (`listeners.tls_identity`), and what a listener does
 * with a peer's certificate after the handshake.
 *
 * @module
 */
import type tls from "node:tls";
import type { GatewayConfig } from "../config/types.ts";
import type { RevocationList } from "./revocation.ts";
import { TlsReason, whyUnverified } from "./tls_refusal.ts";

/** `listeners.tls_client_auth`. */
export type TlsClientAuth = GatewayConfig["listeners"]["tls_client_auth"];
/** `listeners.tls_identity`. */
export type TlsIdentity = GatewayConfig["listeners"]["tls_identity"];

/** The subject-alternative-name prefix of each identity, as node:tls lists them. */
const SAN_PREFIX: Readonly<Record<Exclude<TlsIdentity, "cn">, string>> = {
  san_dns: "DNS:",
  san_uri: "URI:",
  san_email: "email:",
};

/** The certificate's name for `identity`: its CN or first SAN of that kind; "" when none. */
export function certificateNameOf(peer: tls.PeerCertificate, identity: TlsIdentity): string {
  if (identity === "cn") {
    const cn: unknown = peer.subject?.CN;
    return typeof cn === "string" ? cn : Array.isArray(cn) ? String(cn[0] ?? "") : "";
  }
  const prefix = SAN_PREFIX[identity];
  for (const entry of (peer.subjectaltname ?? "").split(", ")) {
    if (entry.startsWith(prefix)) return entry.slice(prefix.length);
  }
  return "";
}

/** What a listener does with a peer after the handshake; a refusal says why (tls_refusal.ts). */
export type PeerVerdict =
  | { readonly ok: true; readonly name: string | undefined }
  | {
    readonly ok: false;
    readonly why: "missing" | "unverified" | "revoked";
    readonly reason: string;
  };

/** What a peer is judged against: the mode, and the client CA's subjects and CRL. */
export interface PeerJudge {
  readonly clientAuth: Exclude<TlsClientAuth, "none">;
  readonly identity: TlsIdentity;
  readonly caSubjects: ReadonlySet<string>;
  readonly revoked: RevocationList | null;
}

/**
 * Judges the peer of a finished handshake (node:tls verified its certificate, if any, against
 * the client CA, but let it through so the refusal can say why). `require`: no certificate,
 * or one that does not verify, is refused. `optional`: a client without a certificate goes on
 * to username/password, one whose certificate does not verify is refused. A certificate the
 * CRL lists is refused in both.
 */
export function judgePeer(socket: tls.TLSSocket, j: PeerJudge): PeerVerdict {
  try {
    return judgeReadable(socket, j);
  } catch (e) {
    // A certificate the TLS stack cannot parse (junk in the chain the client sent): refused,
    // never an exception out of the listener's event, which would end the process.
    const reason = `certificate not readable (${(e as Error)?.message ?? e})`;
    return { ok: false, why: "unverified", reason };
  }
}

function judgeReadable(socket: tls.TLSSocket, j: PeerJudge): PeerVerdict {
  // The leaf only: with `true` the stack also parses every certificate the client sent after
  // it, and throws on one that is not a certificate.
  const peer = socket.getPeerCertificate(false);
  const raw = peer?.raw as Uint8Array | undefined;
  if (raw === undefined || raw.length === 0) {
    if (j.clientAuth === "optional") return { ok: true, name: undefined };
    return { ok: false, why: "missing", reason: TlsReason.NO_CERTIFICATE };
  }
  if (!socket.authorized) {
    const library = String(socket.authorizationError ?? "not verified");
    return {
      ok: false,
      why: "unverified",
      reason: whyUnverified(raw, j.caSubjects, Date.now(), library),
    };
  }
  try {
    if (j.revoked?.revokes(raw)) return { ok: false, why: "revoked", reason: TlsReason.REVOKED };
  } catch {
    // not a certificate we can read: no way to check
    return { ok: false, why: "unverified", reason: "certificate not readable for the CRL check" };
  }
  return { ok: true, name: certificateNameOf(peer, j.identity) };
}
