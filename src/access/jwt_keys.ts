/**
 * The keys that may sign a login token: public keys of a JSON Web Key Set (RS256, ES256,
 * EdDSA) and one shared HMAC secret (HS256), imported through Web Crypto. Each key is bound to
 * the one algorithm its type allows, so a token cannot choose how its key is used: an HS256
 * token is checked against the HMAC secret only, never against an RSA public key taken as a
 * secret (algorithm confusion).
 *
 * @module
 */
import { utf8 } from "../base/utf8.ts";

/** The signature algorithms accepted (JWS `alg`). */
export type JwtAlgorithm = "RS256" | "ES256" | "EdDSA" | "HS256";

/** One verification key, bound to its algorithm. */
export interface JwtKey {
  readonly alg: JwtAlgorithm;
  /** JWK `kid`; "" when the set gave none. */
  readonly kid: string;
  readonly key: CryptoKey;
}

/** Every key a token may be signed with: the JWKS file's and the HMAC secret's. */
export interface JwtKeySet {
  readonly keys: readonly JwtKey[];
}

/** Bound of a key set: a file with more keys is refused. */
export const MAX_JWKS_KEYS = 100;

/** Web Crypto's verify parameters per algorithm. */
export const VERIFY_PARAMS: Readonly<Record<JwtAlgorithm, AlgorithmIdentifier | EcdsaParams>> = {
  RS256: { name: "RSASSA-PKCS1-v1_5" },
  ES256: { name: "ECDSA", hash: "SHA-256" },
  EdDSA: { name: "Ed25519" },
  HS256: { name: "HMAC" },
};

/** A key set that is not usable: the message says which key and why. */
export class JwksError extends Error {
  override readonly name = "JwksError";
}

/** Private members of a JWK: dropped, only the public part verifies. */
const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"];

/**
 * Imports a parsed JWKS document (`{"keys": [...]}`). Refuses the whole set on the first key
 * it cannot use, naming it, so a rotation that would lock devices out is noticed at load.
 */
export async function importJwks(doc: unknown): Promise<JwtKeySet> {
  if (!isObject(doc) || !Array.isArray(doc.keys)) {
    throw new JwksError('is not a JWK set: expected {"keys": [...]}');
  }
  if (doc.keys.length > MAX_JWKS_KEYS) {
    throw new JwksError(`holds ${doc.keys.length} keys, more than ${MAX_JWKS_KEYS}`);
  }
  const keys: JwtKey[] = [];
  for (const [i, jwk] of doc.keys.entries()) keys.push(await importOne(jwk, i));
  return { keys };
}

async function importOne(raw: unknown, i: number): Promise<JwtKey> {
  const at = `key ${i}`;
  if (!isObject(raw)) throw new JwksError(`${at} is not an object`);
  const kid = raw.kid === undefined ? "" : raw.kid;
  if (typeof kid !== "string") throw new JwksError(`${at}: "kid" must be a string`);
  const name = kid === "" ? at : `${at} ("${kid}")`;
  if (raw.use !== undefined && raw.use !== "sig") {
    throw new JwksError(`${name}: "use" is "${raw.use}", not "sig"`);
  }
  const alg = algorithmOf(raw, name);
  const jwk: Record<string, unknown> = { ...raw };
  for (const m of [...PRIVATE_MEMBERS, "key_ops", "alg", "use", "ext"]) delete jwk[m];
  const params = alg === "RS256"
    ? { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }
    : alg === "ES256"
    ? { name: "ECDSA", namedCurve: "P-256" }
    : { name: "Ed25519" };
  try {
    const key = await crypto.subtle.importKey("jwk", jwk as JsonWebKey, params, false, [
      "verify",
    ]);
    return { alg, kid, key };
  } catch (err) {
    throw new JwksError(`${name} cannot be imported: ${(err as Error).message}`);
  }
}

/** The one algorithm a JWK's type allows; its own `alg`, if given, must be that one. */
function algorithmOf(jwk: Record<string, unknown>, name: string): JwtAlgorithm {
  let alg: JwtAlgorithm;
  if (jwk.kty === "RSA") alg = "RS256";
  else if (jwk.kty === "EC" && jwk.crv === "P-256") alg = "ES256";
  else if (jwk.kty === "OKP" && jwk.crv === "Ed25519") alg = "EdDSA";
  else if (jwk.kty === "oct") {
    throw new JwksError(`${name} is a symmetric key: set it as auth.jwt_hmac_secret`);
  } else {
    const what = `kty "${jwk.kty}"${jwk.crv === undefined ? "" : ` crv "${jwk.crv}"`}`;
    throw new JwksError(`${name} has ${what}; RSA, EC P-256 and OKP Ed25519 keys are accepted`);
  }
  if (jwk.alg !== undefined && jwk.alg !== alg) {
    throw new JwksError(`${name}: "alg" is "${jwk.alg}", but its key type signs ${alg}`);
  }
  return alg;
}

/** The HS256 key of a shared secret (its UTF-8 bytes). */
export async function importHmacSecret(secret: string): Promise<JwtKey> {
  const key = await crypto.subtle.importKey(
    "raw",
    utf8(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["verify"],
  );
  return { alg: "HS256", kid: "", key };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
