/**
 * Why a TLS client was refused, in the short stable words the log and SECURITY.md use. Deno's
 * node:tls does not say why a client certificate failed: a handshake it refuses ends in "socket
 * hang up", and after a handshake it let through `authorizationError` is
 * "UNABLE_TO_VERIFY_LEAF_SIGNATURE" for an unknown CA, an expired certificate and an X.509 v1 one
 * alike. So the listener lets every handshake with a certificate finish and judges the peer
 * right after it (nothing of MQTT is read before), and for a certificate the stack did not
 * verify the reason is read from the certificate itself: its version, its issuer against the
 * client CA file's subjects, its validity dates.
 *
 * @module
 */
import { childrenOf, type DerElement, hexOfElement, readElement, Tag } from "./_der.ts";

/** The reasons a certificate or a handshake is refused for (besides the library's messages). */
export const TlsReason = Object.freeze({
  UNKNOWN_CA: "unknown CA",
  EXPIRED: "certificate expired",
  NOT_YET_VALID: "certificate not yet valid",
  REVOKED: "certificate revoked",
  V1: "X.509 v1 certificate",
  NO_CERTIFICATE: "no client certificate",
  PROTOCOL_VERSION: "protocol version",
  NOT_TLS: "not TLS",
  TIMEOUT: "handshake timed out",
});

/** The fields of a certificate a refusal is explained by. */
interface CertificateFacts {
  readonly version1: boolean;
  /** Issuer Name, DER as hex (comparable with {@link caSubjectsOf}). */
  readonly issuer: string;
  readonly notBefore: number;
  readonly notAfter: number;
}

/** The subject Names (DER as hex) of the PEM certificates in `pem` (the client CA file). */
export function caSubjectsOf(pem: string): Set<string> {
  const out = new Set<string>();
  for (const m of pem.matchAll(/-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/g)) {
    try {
      const der = Uint8Array.from(atob(m[1].replace(/\s+/g, "")), (c) => c.charCodeAt(0));
      const fields = tbsFields(der);
      out.add(fields[(fields[0]?.el.tag === Tag.CONTEXT_0 ? 1 : 0) + 4].hex);
    } catch { /* not a certificate we can read: it names no issuer we could match */ }
  }
  return out;
}

/**
 * Why the TLS stack did not verify the certificate `der`: v1, unknown CA, expired or not yet
 * valid (in that order); otherwise the stack's own word (`libraryError`), e.g. a signature that
 * does not verify under a CA of the same name.
 */
export function whyUnverified(
  der: Uint8Array,
  caSubjects: ReadonlySet<string>,
  now: number,
  libraryError: string,
): string {
  let facts: CertificateFacts;
  try {
    facts = certificateFacts(der);
  } catch {
    return `certificate not verified (${libraryError}; not a readable certificate)`;
  }
  if (facts.version1) return TlsReason.V1;
  if (!caSubjects.has(facts.issuer)) return TlsReason.UNKNOWN_CA;
  if (now > facts.notAfter) return TlsReason.EXPIRED;
  if (now < facts.notBefore) return TlsReason.NOT_YET_VALID;
  return `certificate not verified (${libraryError})`;
}

/**
 * The reason of a failed handshake (node:tls `tlsClientError`), and whether it is a refusal:
 * a peer that closes before the handshake is done ("socket hang up": a TCP health check, a
 * client that gave up) was not refused by the gateway.
 */
export function handshakeFailure(err: Error): { reason: string; refused: boolean } {
  const msg = err.message;
  if (/timed? ?out/i.test(msg)) return { reason: TlsReason.TIMEOUT, refused: true };
  if (msg === "socket hang up" || (err as { code?: string }).code === "ECONNRESET") {
    return { reason: "closed by the peer during the handshake", refused: false };
  }
  // rustls: a ClientHello of TLS 1.0/1.1 lacks what TLS 1.2 requires, or offers no version we take.
  if (
    /SignatureAlgorithmsExtensionRequired|Tls12NotOffered|SupportedVersions|ProtocolVersion/.test(
      msg,
    )
  ) {
    return { reason: TlsReason.PROTOCOL_VERSION, refused: true };
  }
  if (/InvalidContentType|wrong version number/i.test(msg)) {
    return { reason: TlsReason.NOT_TLS, refused: true };
  }
  if (/peer sent no certificates/i.test(msg)) {
    return { reason: TlsReason.NO_CERTIFICATE, refused: true };
  }
  const alert = /received fatal alert: (\w+)/.exec(msg);
  if (alert !== null && /UnknownCA|BadCertificate|CertificateUnknown/.test(alert[1])) {
    return {
      reason: `the client does not trust the gateway's certificate (${alert[1]})`,
      refused: true,
    };
  }
  return { reason: msg, refused: true };
}

/** The TBSCertificate's fields with the hex of each whole element. */
function tbsFields(der: Uint8Array): { el: DerElement; hex: string }[] {
  const cert = readElement(der, 0);
  const [tbs] = childrenOf(der, cert);
  if (cert.tag !== Tag.SEQUENCE || tbs?.tag !== Tag.SEQUENCE) throw new Error("not a certificate");
  const out: { el: DerElement; hex: string }[] = [];
  for (let at = tbs.start; at < tbs.end;) {
    const el = readElement(der, at, tbs.end);
    out.push({ el, hex: hexOfElement(der, at, el) });
    at = el.next;
  }
  return out;
}

function certificateFacts(der: Uint8Array): CertificateFacts {
  const fields = tbsFields(der);
  // [0] version absent, or present and 0, is v1 (RFC 5280 4.1.2.1).
  const versioned = fields[0]?.el.tag === Tag.CONTEXT_0;
  const version = versioned ? versionOf(der, fields[0].el) : 0;
  const i = versioned ? 1 : 0;
  const validity = fields[i + 3]?.el;
  if (validity?.tag !== Tag.SEQUENCE) throw new Error("no validity");
  const [from, to] = childrenOf(der, validity);
  return {
    version1: version === 0,
    issuer: fields[i + 2].hex,
    notBefore: timeOf(der, from),
    notAfter: timeOf(der, to),
  };
}

function versionOf(der: Uint8Array, explicit: DerElement): number {
  const [int] = childrenOf(der, explicit);
  if (int?.tag !== Tag.INTEGER || int.end - int.start !== 1) throw new Error("bad version");
  return der[int.start];
}

/** A UTCTime (YYMMDDHHMMSSZ, RFC 5280: 50–99 are 19xx) or GeneralizedTime, as epoch ms. */
function timeOf(der: Uint8Array, e: DerElement | undefined): number {
  if (e?.tag !== Tag.UTC_TIME && e?.tag !== Tag.GENERALIZED_TIME) throw new Error("bad time");
  let s = new TextDecoder().decode(der.subarray(e.start, e.end));
  if (e.tag === Tag.UTC_TIME) s = (Number(s.slice(0, 2)) >= 50 ? "19" : "20") + s;
  const m = /^(\d{4})(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)Z$/.exec(s);
  if (m === null) throw new Error("bad time");
  const [, y, mo, d, h, mi, se] = m.map(Number);
  return Date.UTC(y, mo - 1, d, h, mi, se);
}
