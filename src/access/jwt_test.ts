import assert from "node:assert/strict";
import { decodeBytes, type JwtRules, verifyJwt } from "./jwt.ts";
import { importHmacSecret, importJwks, JwksError, type JwtKeySet } from "./jwt_keys.ts";
import {
  b64url,
  claimsFor,
  jwksOf,
  makeSigner,
  signHs256,
  signToken,
  unsignedToken,
} from "../../tests/helpers/jwt.ts";

const RULES: JwtRules = { issuer: "", audience: "", leewayS: 30 };
const SECRET = "a shared secret of at least thirty-two bytes";

const rsa = await makeSigner("RS256", "rsa-1");
const ec = await makeSigner("ES256", "ec-1");
const ed = await makeSigner("EdDSA", "ed-1");
const set: JwtKeySet = await importJwks(JSON.parse(jwksOf(rsa, ec, ed)));
const withHmac: JwtKeySet = { keys: [...set.keys, await importHmacSecret(SECRET)] };

async function reasonOf(token: string, keys = set, rules = RULES, now = Date.now()) {
  const v = await verifyJwt(token, keys, rules, now);
  return v.ok ? "ok" : v.reason;
}

Deno.test("verifyJwt() accepts RS256, ES256 and EdDSA tokens signed by a key of the set", async () => {
  for (const s of [rsa, ec, ed]) {
    const v = await verifyJwt(await signToken(s, claimsFor("d-1")), set, RULES, Date.now());
    assert.ok(v.ok, s.alg);
    assert.equal(v.claims.sub, "d-1");
  }
});

Deno.test("verifyJwt() accepts a token without kid when a key of its algorithm verifies it", async () => {
  assert.equal(await reasonOf(await signToken(ec, claimsFor("d"), { kid: undefined })), "ok");
});

Deno.test("verifyJwt() refuses bad tokens, each with its reason", async () => {
  const now = Math.floor(Date.now() / 1000);
  const other = await makeSigner("RS256", "rsa-1"); // same kid, another key: forged
  const good = await signToken(rsa, claimsFor("d"));
  const [h, p] = good.split(".");
  const cases: [string, string][] = [
    ["not-a-token", "malformed: not three base64url parts"],
    ["a.b.c.d", "malformed: not three base64url parts"],
    ["e30.e30.@@", "malformed: not three base64url parts"],
    [`${b64url("[1]")}.${p}.AAAA`, "malformed: header is not a JSON object"],
    [unsignedToken(claimsFor("d")), "unsigned (alg none)"],
    [`${b64url('{"alg":"RS512"}')}.${p}.AAAA`, 'algorithm "RS512" is not accepted'],
    [`${h}.${p}.`, "malformed: no signature"],
    [await signToken(other, claimsFor("d")), "signature does not verify"],
    [
      `${h}.${b64url(JSON.stringify(claimsFor("root")))}.${good.split(".")[2]}`,
      "signature does not verify",
    ],
    [await signToken(rsa, claimsFor("d"), { kid: "gone" }), 'no RS256 key with kid "gone"'],
    [await signToken(rsa, { sub: "d" }), "has no numeric exp"],
    [await signToken(rsa, claimsFor("d", { exp: now - 31 })), "expired"],
    [await signToken(rsa, claimsFor("d", { nbf: now + 60 })), "not yet valid (nbf)"],
    [
      await signToken(rsa, claimsFor("d"), { crit: ["x"] }),
      "header has crit extensions, none understood",
    ],
    [
      await signHs256(SECRET, claimsFor("d")),
      "algorithm HS256 is not accepted (no auth.jwt_hmac_secret)",
    ],
  ];
  for (const [token, reason] of cases) assert.equal(await reasonOf(token), reason, token);
});

Deno.test("verifyJwt() allows the leeway on exp and nbf, and says until when the token holds", async () => {
  const now = Math.floor(Date.now() / 1000);
  const t = await signToken(rsa, claimsFor("d", { exp: now - 10, nbf: now + 10 }));
  const v = await verifyJwt(t, set, RULES, now * 1000);
  assert.ok(v.ok);
  assert.equal(v.validUntilMs, (now - 10 + 30) * 1000);
});

Deno.test("verifyJwt() checks iss and aud when configured", async () => {
  const rules = { issuer: "https://idp", audience: "gw", leewayS: 0 };
  const ok = claimsFor("d", { iss: "https://idp", aud: ["other", "gw"] });
  assert.equal(await reasonOf(await signToken(ed, ok), set, rules), "ok");
  const wrongIss = { ...ok, iss: "https://evil" };
  assert.equal(await reasonOf(await signToken(ed, wrongIss), set, rules), "wrong issuer");
  const wrongAud = { ...ok, aud: "other" };
  assert.equal(await reasonOf(await signToken(ed, wrongAud), set, rules), "wrong audience");
  const noAud = claimsFor("d", { iss: "https://idp" });
  assert.equal(await reasonOf(await signToken(ed, noAud), set, rules), "wrong audience");
});

Deno.test("verifyJwt() takes HS256 with the shared secret only, never with a public key as secret", async () => {
  assert.equal(await reasonOf(await signHs256(SECRET, claimsFor("d")), withHmac), "ok");
  // Algorithm confusion: the RSA public key (as its JWK text, or its modulus) used as HMAC secret.
  for (const misused of [JSON.stringify(rsa.jwk), decodeBytes(rsa.jwk.n!)!]) {
    const forged = await signHs256(misused, claimsFor("root"), { kid: "rsa-1" });
    assert.equal(await reasonOf(forged, withHmac), "signature does not verify");
    assert.match(await reasonOf(forged, set), /^algorithm HS256 is not accepted/);
  }
});

Deno.test("importJwks() refuses sets it cannot use, naming the key", async () => {
  const cases: [unknown, RegExp][] = [
    [[], /not a JWK set/],
    [{ keys: [{ kty: "oct", k: "AAAA", kid: "s" }] }, /key 0 \("s"\) is a symmetric key/],
    [{ keys: [{ kty: "EC", crv: "P-384", x: "", y: "" }] }, /kty "EC" crv "P-384"/],
    [{ keys: [{ ...rsa.jwk, alg: "HS256" }] }, /"alg" is "HS256", but its key type signs RS256/],
    [{ keys: [{ ...rsa.jwk, use: "enc" }] }, /"use" is "enc"/],
    [{ keys: [{ kty: "RSA", n: "AA", kid: 7 }] }, /"kid" must be a string/],
    [{ keys: [{ kty: "RSA", kid: "broken" }] }, /key 0 \("broken"\) cannot be imported/],
    [{ keys: Array(101).fill(rsa.jwk) }, /holds 101 keys, more than 100/],
  ];
  for (const [doc, message] of cases) {
    await assert.rejects(
      () => importJwks(doc),
      (e) => e instanceof JwksError && message.test(e.message),
    );
  }
});

Deno.test("importJwks() keeps only the public part of a key given with its private members", async () => {
  const pair = await crypto.subtle.generateKey({ name: "Ed25519" }, true, [
    "sign",
    "verify",
  ]) as CryptoKeyPair;
  const priv = await crypto.subtle.exportKey("jwk", pair.privateKey);
  const keys = await importJwks({ keys: [{ ...priv, kid: "p" }] });
  assert.equal(keys.keys[0].key.type, "public");
});
