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

/** What a listener does with a peer after the handshake. */
export type PeerVerdict =
  | { readonly ok: true; readonly name: string | undefined }
  | { readonly ok: false; readonly why: "unverified" | "revoked" };

/**
 * Judges the peer of a finished handshake. `require`: node:tls has already failed a handshake
 * without a certificate that verifies. `optional`: a client without a certificate goes on to
 * username/password, one whose certificate does not verify is refused. A certificate the CRL
 * lists is refused in both.
 */
export function judgePeer(
  socket: tls.TLSSocket,
  identity: TlsIdentity,
  revoked: RevocationList | null,
): PeerVerdict {
  const peer = socket.getPeerCertificate(true);
  const raw = peer?.raw as Uint8Array | undefined;
  if (raw === undefined || raw.length === 0) return { ok: true, name: undefined };
  if (!socket.authorized) return { ok: false, why: "unverified" };
  try {
    if (revoked?.revokes(raw)) return { ok: false, why: "revoked" };
  } catch {
    return { ok: false, why: "unverified" }; // not a certificate we can read: no way to check
  }
  return { ok: true, name: certificateNameOf(peer, identity) };
}
