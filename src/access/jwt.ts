/**
 * Verification of a login token (a JWS compact JSON Web Token, RFC 7519), in the order that
 * spends the least on a bad one: its shape, its header's algorithm, the key, the signature
 * (Web Crypto), then the claims `exp`, `nbf`, `iss` and `aud` with a leeway for clock skew.
 * Every refusal is a value naming the reason in words an operator can act on, never a part of
 * the token but its key id.
 *
 * @module
 */
import { utf8 } from "../base/utf8.ts";
import { type JwtAlgorithm, type JwtKey, type JwtKeySet, VERIFY_PARAMS } from "./jwt_keys.ts";

/** What a token must satisfy besides its signature. */
export interface JwtRules {
  /** Required `iss`; "" = not checked. */
  readonly issuer: string;
  /** A value `aud` must hold; "" = not checked. */
  readonly audience: string;
  /** Clock skew allowed on `exp` and `nbf` (s). */
  readonly leewayS: number;
}

/** A verified token's claims, and when it stops being valid (wall clock, ms, leeway added). */
export interface VerifiedJwt {
  readonly ok: true;
  readonly claims: Readonly<Record<string, unknown>>;
  readonly validUntilMs: number;
}

/** Outcome of {@link verifyJwt}. */
export type JwtVerdict = VerifiedJwt | { readonly ok: false; readonly reason: string };

const SEGMENT = /^[A-Za-z0-9_-]*$/;
const ACCEPTED = new Set<string>(["RS256", "ES256", "EdDSA", "HS256"]);
/** Longest key id a refusal quotes. */
const KID_SHOWN = 64;

/** Verifies `token` against `keys` and `rules` at wall-clock time `nowMs`. */
export async function verifyJwt(
  token: string,
  keys: JwtKeySet,
  rules: JwtRules,
  nowMs: number,
): Promise<JwtVerdict> {
  const parts = token.split(".");
  if (parts.length !== 3 || !parts.every((p) => SEGMENT.test(p))) {
    return refuse("malformed: not three base64url parts");
  }
  const header = decodeJson(parts[0]);
  if (header === null) return refuse("malformed: header is not a JSON object");
  const alg = header.alg;
  if (alg === "none" || alg === "None" || alg === "NONE") return refuse("unsigned (alg none)");
  if (typeof alg !== "string" || !ACCEPTED.has(alg)) {
    return refuse(`algorithm ${JSON.stringify(alg)} is not accepted`);
  }
  if (header.crit !== undefined) return refuse("header has crit extensions, none understood");
  const chosen = keysFor(keys, alg as JwtAlgorithm, header.kid);
  if (typeof chosen === "string") return refuse(chosen);
  const signature = decodeBytes(parts[2]);
  if (signature === null || signature.length === 0) return refuse("malformed: no signature");
  const signed = utf8(`${parts[0]}.${parts[1]}`);
  if (!await anyVerifies(chosen, signature, signed)) return refuse("signature does not verify");
  const claims = decodeJson(parts[1]);
  if (claims === null) return refuse("malformed: payload is not a JSON object");
  return checkClaims(claims, rules, nowMs);
}

/** The keys that may have signed a token of `alg` with key id `kid`, or why there are none. */
function keysFor(set: JwtKeySet, alg: JwtAlgorithm, kid: unknown): JwtKey[] | string {
  if (kid !== undefined && typeof kid !== "string") return "malformed: kid is not a string";
  const ofAlg = set.keys.filter((k) => k.alg === alg);
  if (ofAlg.length === 0) {
    return `algorithm ${alg} is not accepted (no ${
      alg === "HS256" ? "auth.jwt_hmac_secret" : "key of that type in auth.jwt_jwks_file"
    })`;
  }
  if (kid === undefined || alg === "HS256") return ofAlg;
  const named = ofAlg.filter((k) => k.kid === kid);
  if (named.length > 0) return named;
  return `no ${alg} key with kid ${JSON.stringify(kid.slice(0, KID_SHOWN))}`;
}

async function anyVerifies(keys: JwtKey[], signature: Uint8Array, signed: Uint8Array) {
  for (const k of keys) {
    try {
      const ok = await crypto.subtle.verify(
        VERIFY_PARAMS[k.alg],
        k.key,
        signature as BufferSource,
        signed as BufferSource,
      );
      if (ok) return true;
    } catch {
      // A signature of the wrong length for the key: not this key's.
    }
  }
  return false;
}

function checkClaims(claims: Record<string, unknown>, r: JwtRules, nowMs: number): JwtVerdict {
  const now = nowMs / 1000;
  const { exp, nbf } = claims;
  if (typeof exp !== "number" || !Number.isFinite(exp)) return refuse("has no numeric exp");
  if (now > exp + r.leewayS) return refuse("expired");
  if (nbf !== undefined) {
    if (typeof nbf !== "number" || !Number.isFinite(nbf)) return refuse("nbf is not a number");
    if (nbf > now + r.leewayS) return refuse("not yet valid (nbf)");
  }
  if (r.issuer !== "" && claims.iss !== r.issuer) return refuse("wrong issuer");
  if (r.audience !== "") {
    const aud = claims.aud;
    const held = typeof aud === "string" ? aud === r.audience : Array.isArray(aud) &&
      aud.includes(r.audience);
    if (!held) return refuse("wrong audience");
  }
  return { ok: true, claims, validUntilMs: (exp + r.leewayS) * 1000 };
}

function refuse(reason: string): JwtVerdict {
  return { ok: false, reason };
}

/** A base64url segment's bytes; null when it is not base64url. */
export function decodeBytes(segment: string): Uint8Array | null {
  if (segment.length % 4 === 1) return null;
  const b64 = segment.replaceAll("-", "+").replaceAll("_", "/");
  try {
    return Uint8Array.from(
      atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4)),
      (c) => c.charCodeAt(0),
    );
  } catch {
    return null;
  }
}

/** A base64url segment holding a JSON object; null when it does not. */
function decodeJson(segment: string): Record<string, unknown> | null {
  const bytes = decodeBytes(segment);
  if (bytes === null) return null;
  try {
    const v: unknown = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
    return typeof v === "object" && v !== null && !Array.isArray(v)
      ? v as Record<string, unknown>
      : null;
  } catch {
    return null;
  }
}
