/**
 * Client-certificate revocation by CRL file (`listeners.tls_crl_file`). Deno's TLS stack (its
 * node:tls over rustls) takes no CRL: its `crl` option is ignored, so the gateway checks the
 * peer's certificate itself right after the handshake, against the serial numbers the CRL
 * lists under that certificate's issuer. The CRL's own signature is not verified: the file is
 * trusted as the CA file beside it is (both are the operator's), so it must come from the CA.
 *
 * @module
 */
import { childrenOf, hexOfElement, integerHex, readElement, Tag } from "./_der.ts";

/** The revoked serials of one or more CRLs, by issuer. */
export class RevocationList {
  /** Issuer Name (DER as hex) → revoked serial numbers (upper-case hex). */
  readonly #revoked = new Map<string, Set<string>>();

  /** Revoked serials in all (for the log line at start and reload). */
  get size(): number {
    let n = 0;
    for (const s of this.#revoked.values()) n += s.size;
    return n;
  }

  /** Whether `certDer` (a peer's certificate, DER) is listed as revoked by its issuer. */
  revokes(certDer: Uint8Array): boolean {
    const { issuer, serial } = certificateIssuerAndSerial(certDer);
    return this.#revoked.get(issuer)?.has(serial) ?? false;
  }

  /** Adds one CRL (DER). Throws on bytes that are not a CRL. */
  add(der: Uint8Array): void {
    const list = readElement(der, 0);
    const [tbs] = childrenOf(der, list);
    if (list.tag !== Tag.SEQUENCE || tbs?.tag !== Tag.SEQUENCE) throw new Error("not a CRL");
    const fields = childrenOf(der, tbs);
    let i = fields[0]?.tag === Tag.INTEGER ? 1 : 0; // version (v2)
    i++; // signature algorithm
    const issuerEl = fields[i++];
    if (issuerEl?.tag !== Tag.SEQUENCE) throw new Error("CRL without an issuer");
    const issuer = hexOfElement(der, fieldStart(der, tbs, i - 1), issuerEl);
    i++; // thisUpdate
    const t = fields[i]?.tag;
    if (t === Tag.UTC_TIME || t === Tag.GENERALIZED_TIME) i++; // nextUpdate
    const serials = this.#revoked.get(issuer) ?? new Set<string>();
    this.#revoked.set(issuer, serials);
    const revoked = fields[i];
    if (revoked?.tag !== Tag.SEQUENCE) return; // no revoked certificates
    for (const entry of childrenOf(der, revoked)) {
      const [serial] = childrenOf(der, entry);
      serials.add(integerHex(der, serial));
    }
  }
}

/** Where the `index`th child of `parent` starts (its header included). */
function fieldStart(b: Uint8Array, parent: { start: number; end: number }, index: number): number {
  let at = parent.start;
  for (let k = 0; k < index; k++) at = readElement(b, at, parent.end).next;
  return at;
}

/** A certificate's issuer Name (DER as hex) and serial number (upper-case hex). */
export function certificateIssuerAndSerial(der: Uint8Array): { issuer: string; serial: string } {
  const cert = readElement(der, 0);
  const [tbs] = childrenOf(der, cert);
  if (cert.tag !== Tag.SEQUENCE || tbs?.tag !== Tag.SEQUENCE) throw new Error("not a certificate");
  const fields = childrenOf(der, tbs);
  const i = fields[0]?.tag === Tag.CONTEXT_0 ? 1 : 0; // [0] version
  const serial = integerHex(der, fields[i]);
  const issuerEl = fields[i + 2];
  return { issuer: hexOfElement(der, fieldStart(der, tbs, i + 2), issuerEl), serial };
}

/** Parses a CRL file: PEM (one or more `X509 CRL` blocks) or a single DER CRL. */
export function parseRevocationList(bytes: Uint8Array): RevocationList {
  const list = new RevocationList();
  const text = new TextDecoder().decode(bytes);
  const blocks = [...text.matchAll(/-----BEGIN X509 CRL-----([\s\S]*?)-----END X509 CRL-----/g)];
  if (blocks.length === 0) {
    list.add(bytes);
    return list;
  }
  for (const m of blocks) {
    const b64 = m[1].replace(/\s+/g, "");
    list.add(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)));
  }
  return list;
}
