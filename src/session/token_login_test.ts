import assert from "node:assert/strict";
import { loadConfig } from "../config/load.ts";
import { importJwks } from "../access/jwt_keys.ts";
import { canPoll, canSend } from "../access/permissions.ts";
import { looksLikeToken, TokenLogin } from "./token_login.ts";
import { claimsFor, jwksOf, makeSigner, signToken } from "../../tests/helpers/jwt.ts";

const TEMPLATES = `
[jwt_templates.device.permissions.streams.devices.topics."{sub}"]
send_messages = true
[jwt_templates.device.permissions.streams."site_{site}"]
poll_messages = true
[jwt_templates.reader.permissions.global]
poll_messages = true
`;

const signer = await makeSigner("ES256", "k1");
const keys = await importJwks(JSON.parse(jwksOf(signer)));

function loginOf(toml = TEMPLATES, env: Record<string, string> = {}): TokenLogin {
  const config = loadConfig({ text: toml, source: "test.toml", env });
  return new TokenLogin(config.auth, keys, config.jwt_templates);
}

async function login(
  claims: Record<string, unknown>,
  username: string | null = null,
  l = loginOf(),
) {
  return await l.login(await signToken(signer, claims), username);
}

Deno.test("looksLikeToken() is true for a password beginning like a JWS header", () => {
  const enc = (s: string) => new TextEncoder().encode(s);
  assert.equal(looksLikeToken(enc("eyJhbGciOiJFUzI1NiJ9.e30.sig")), true);
  assert.equal(looksLikeToken(enc("secret")), false);
  assert.equal(looksLikeToken(enc("ey")), false);
});

Deno.test("TokenLogin.login() takes rights from the permissions claim, in a [[users]] entry's form", async () => {
  const rights = { streams: { plant: { topics: { line_1: { send_messages: true } } } } };
  const r = await login(claimsFor("dev-1", { mqtt_permissions: rights, mqtt_template: "reader" }));
  assert.ok(r.ok);
  assert.equal(r.principal.username, "dev-1");
  assert.equal(canSend(r.principal.permissions, "plant", "line_1"), true);
  assert.equal(canSend(r.principal.permissions, "plant", "line_2"), false);
  assert.equal(
    canPoll(r.principal.permissions, "plant", "line_1"),
    false,
    "the claim wins over the template",
  );
});

Deno.test("TokenLogin.login() fills a template's {claim} placeholders from the token", async () => {
  const r = await login(claimsFor("dev-7", { mqtt_template: "device", site: 42 }));
  assert.ok(r.ok);
  const p = r.principal.permissions;
  assert.equal(canSend(p, "devices", "dev-7"), true);
  assert.equal(canSend(p, "devices", "dev-8"), false);
  assert.equal(canSend(p, "devices", "{sub}"), false);
  assert.equal(canPoll(p, "site_42", "anything"), true);
  assert.ok(r.principal.tokenValidUntilMs > Date.now());
});

Deno.test("TokenLogin.login() uses auth.jwt_default_template for a token with neither claim", async () => {
  const l = loginOf(TEMPLATES, { IGGY_MQTT_AUTH_JWT_DEFAULT_TEMPLATE: "reader" });
  const r = await login(claimsFor("dash"), null, l);
  assert.ok(r.ok);
  assert.equal(canPoll(r.principal.permissions, "any", "thing"), true);
});

Deno.test("TokenLogin.login() takes the principal from auth.jwt_principal_claim", async () => {
  const l = loginOf(TEMPLATES, { IGGY_MQTT_AUTH_JWT_PRINCIPAL_CLAIM: "device_id" });
  const r = await login(
    claimsFor("ignored", { device_id: "meter-3", mqtt_template: "reader" }),
    null,
    l,
  );
  assert.ok(r.ok);
  assert.equal(r.principal.username, "meter-3");
});

Deno.test("TokenLogin.login() refuses tokens whose claims give no principal or no rights", async () => {
  const cases: [Record<string, unknown>, string | null, string][] = [
    [
      claimsFor("d"),
      null,
      'token refused: grants no rights (no "mqtt_permissions" or "mqtt_template" claim, no auth.jwt_default_template)',
    ],
    [
      claimsFor("d", { mqtt_template: "device" }),
      null,
      'token refused: template "device" needs claim "site" (a string or number), which the token lacks',
    ],
    [
      claimsFor("d", { mqtt_template: "admin" }),
      null,
      'token refused: template "admin" does not exist',
    ],
    [
      claimsFor("d", { mqtt_template: 3 }),
      null,
      'token refused: claim "mqtt_template" is not a string',
    ],
    [
      claimsFor("d", { mqtt_permissions: { global: { send: true } } }),
      null,
      "token refused: claim mqtt_permissions.global.send unknown key",
    ],
    [
      claimsFor("d", { mqtt_permissions: [] }),
      null,
      "token refused: claim mqtt_permissions must be a table",
    ],
    [
      claimsFor("", { mqtt_template: "reader" }),
      null,
      'token refused: claim "sub" is not a 1-255 byte string',
    ],
    [
      { ...claimsFor("d", { mqtt_template: "reader" }), sub: 17 },
      null,
      'token refused: claim "sub" is not a 1-255 byte string',
    ],
    [
      claimsFor("d", { mqtt_template: "reader" }),
      "other",
      'CONNECT username "other" is not the token\'s principal "d"',
    ],
  ];
  for (const [claims, username, reason] of cases) {
    const r = await login(claims, username);
    assert.equal(r.ok ? "ok" : r.reason, reason, JSON.stringify(claims));
  }
});

Deno.test("TokenLogin.login() accepts the principal's own name or none as CONNECT username", async () => {
  for (const username of [null, "", "d"]) {
    assert.ok((await login(claimsFor("d", { mqtt_template: "reader" }), username)).ok);
  }
});
