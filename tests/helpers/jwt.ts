/**
 * Login tokens for tests: key pairs made by Web Crypto (or by openssl), tokens signed with them,
 * JWK sets to write to a file. Only tests sign; the gateway only verifies.
 */
import type { JwtAlgorithm } from "../../src/access/jwt_keys.ts";

const PARAMS = {
  RS256: {
    gen: {
      name: "RSASSA-PKCS1-v1_5",
      modulusLength: 2048,
      publicExponent: new Uint8Array([1, 0, 1]),
      hash: "SHA-256",
    },
    sign: { name: "RSASSA-PKCS1-v1_5" },
  },
  ES256: {
    gen: { name: "ECDSA", namedCurve: "P-256" },
    sign: { name: "ECDSA", hash: "SHA-256" },
  },
  EdDSA: { gen: { name: "Ed25519" }, sign: { name: "Ed25519" } },
} as const;

/** A signing key pair and the public JWK the gateway is given. */
export interface TestSigner {
  readonly alg: Exclude<JwtAlgorithm, "HS256">;
  readonly kid: string;
  readonly privateKey: CryptoKey;
  readonly jwk: JsonWebKey & { kid: string };
}

/** A fresh key pair of `alg`. */
export async function makeSigner(alg: TestSigner["alg"], kid: string): Promise<TestSigner> {
  const pair = await crypto.subtle.generateKey(PARAMS[alg].gen, true, [
    "sign",
    "verify",
  ]) as CryptoKeyPair;
  const jwk = await crypto.subtle.exportKey("jwk", pair.publicKey);
  delete jwk.key_ops;
  delete jwk.ext;
  return { alg, kid, privateKey: pair.privateKey, jwk: { ...jwk, kid } };
}

/** A JWKS document of the signers' public keys. */
export function jwksOf(...signers: { readonly jwk: JsonWebKey }[]): string {
  return JSON.stringify({ keys: signers.map((s) => s.jwk) });
}

/** base64url of bytes or of a string's UTF-8. */
export function b64url(data: Uint8Array | string): string {
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

/** Claims valid for an hour from now, for `sub`. */
export function claimsFor(sub: string, extra: Record<string, unknown> = {}) {
  const now = Math.floor(Date.now() / 1000);
  return { sub, iat: now, exp: now + 3600, ...extra };
}

/** A token signed by `signer` (its kid in the header unless `header` says otherwise). */
export async function signToken(
  signer: TestSigner,
  claims: Record<string, unknown>,
  header: Record<string, unknown> = {},
): Promise<string> {
  const h = b64url(JSON.stringify({ alg: signer.alg, typ: "JWT", kid: signer.kid, ...header }));
  const input = `${h}.${b64url(JSON.stringify(claims))}`;
  const sig = await crypto.subtle.sign(
    PARAMS[signer.alg].sign,
    signer.privateKey,
    new TextEncoder().encode(input),
  );
  return `${input}.${b64url(new Uint8Array(sig))}`;
}

/** An HS256 token signed with `secret` (any bytes: a shared secret, or a public key misused). */
export async function signHs256(
  secret: string | Uint8Array,
  claims: Record<string, unknown>,
  header: Record<string, unknown> = {},
): Promise<string> {
  const raw = typeof secret === "string" ? new TextEncoder().encode(secret) : secret;
  const key = await crypto.subtle.importKey(
    "raw",
    raw as BufferSource,
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const h = b64url(JSON.stringify({ alg: "HS256", typ: "JWT", ...header }));
  const input = `${h}.${b64url(JSON.stringify(claims))}`;
  const sig = await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(input));
  return `${input}.${b64url(new Uint8Array(sig))}`;
}

/** An unsigned token (`alg: none`, empty signature). */
export function unsignedToken(claims: Record<string, unknown>): string {
  return `${b64url(JSON.stringify({ alg: "none", typ: "JWT" }))}.${
    b64url(JSON.stringify(claims))
  }.`;
}

/** A key pair made by openssl (RS256 or EdDSA): its public JWK, and a signer that runs openssl. */
export interface OpensslSigner {
  readonly jwk: JsonWebKey & { kid: string };
  sign(claims: Record<string, unknown>): Promise<string>;
}

async function openssl(args: string[], stdin?: Uint8Array): Promise<Uint8Array> {
  const p = new Deno.Command("openssl", {
    args,
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const w = p.stdin.getWriter();
    await w.write(stdin);
    await w.close();
  }
  const out = await p.output();
  if (!out.success) throw new Error(`openssl ${args[0]}: ${new TextDecoder().decode(out.stderr)}`);
  return out.stdout;
}

/**
 * A key made by `openssl genpkey` in `dir`; tokens signed by `openssl dgst` (RS256) or
 * `openssl pkeyutl -rawin` (Ed25519): a signer that is not Web Crypto.
 */
export async function makeOpensslSigner(
  alg: "RS256" | "EdDSA",
  kid: string,
  dir: string,
): Promise<OpensslSigner> {
  const key = `${dir}/${kid}.pem`;
  const algorithm = alg === "RS256" ? ["RSA", "-pkeyopt", "rsa_keygen_bits:2048"] : ["ED25519"];
  await openssl(["genpkey", "-algorithm", ...algorithm, "-out", key]);
  const spki = await openssl(["pkey", "-in", key, "-pubout", "-outform", "DER"]);
  const params = alg === "RS256"
    ? { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }
    : { name: "Ed25519" };
  const pub = await crypto.subtle.importKey("spki", spki as BufferSource, params, true, ["verify"]);
  const jwk = await crypto.subtle.exportKey("jwk", pub);
  delete jwk.key_ops;
  delete jwk.ext;
  return {
    jwk: { ...jwk, kid },
    async sign(claims) {
      const h = b64url(JSON.stringify({ alg, typ: "JWT", kid }));
      const input = new TextEncoder().encode(`${h}.${b64url(JSON.stringify(claims))}`);
      const sig = alg === "RS256"
        ? await openssl(["dgst", "-sha256", "-sign", key], input)
        : await opensslRawSign(key, input, dir);
      return `${new TextDecoder().decode(input)}.${b64url(sig)}`;
    },
  };
}

/** Ed25519 signs the message itself (no digest): `pkeyutl -rawin` reads it from a file. */
async function opensslRawSign(key: string, input: Uint8Array, dir: string): Promise<Uint8Array> {
  const file = `${dir}/input-${crypto.randomUUID()}`;
  await Deno.writeFile(file, input);
  try {
    return await openssl(["pkeyutl", "-sign", "-inkey", key, "-rawin", "-in", file]);
  } finally {
    await Deno.remove(file);
  }
}
