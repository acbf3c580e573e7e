import assert from "node:assert/strict";
import { loadConfig } from "./load.ts";
import { ConfigError, OperatorError } from "./errors.ts";
import { readJwtKeys } from "./jwt_keys_file.ts";
import { jwksOf, makeSigner } from "../../tests/helpers/jwt.ts";

const load = (text: string, env: Record<string, string> = {}) =>
  loadConfig({ text, source: "t.toml", env });

function refuses(text: string, env: Record<string, string>, key: string, message: RegExp) {
  assert.throws(
    () => load(text, env),
    (e) => e instanceof ConfigError && e.key === key && message.test(e.message),
  );
}

Deno.test("loadConfig() reads [jwt_templates.<name>] with {claim} placeholders in names", () => {
  const c = load(`[jwt_templates.device.permissions.streams."fleet_{region}".topics."{sub}"]
send_messages = true`);
  const t = c.jwt_templates.get("device")!;
  assert.equal(t.streams.get("fleet_{region}")!.topics.get("{sub}")!.send_messages, true);
});

Deno.test("loadConfig() refuses bad templates, naming the key", () => {
  const at = "jwt_templates.d.permissions.streams";
  refuses(
    `[jwt_templates.d.permissions.streams."{}"]\npoll_messages = true`,
    {},
    `${at}.{}`,
    /does not name a claim/,
  );
  refuses(
    `[jwt_templates.d.permissions.streams."a{sub"]\npoll_messages = true`,
    {},
    `${at}.a{sub`,
    /unmatched/,
  );
  refuses(`[jwt_templates.d]\nrights = 1`, {}, "jwt_templates.d.rights", /unknown key/);
  refuses(
    `[jwt_templates.d.permissions.global]\nsend = true`,
    {},
    "jwt_templates.d.permissions.global.send",
    /unknown key/,
  );
});

Deno.test("loadConfig() takes auth.jwt_hmac_secret from the environment only, and 32 bytes at least", () => {
  refuses(
    `[auth]\njwt_hmac_secret = "x"`,
    {},
    "auth.jwt_hmac_secret",
    /is a secret; set it with IGGY_MQTT_AUTH_JWT_HMAC_SECRET/,
  );
  refuses(
    "",
    { IGGY_MQTT_AUTH_JWT_HMAC_SECRET: "short" },
    "auth.jwt_hmac_secret",
    /at least 32 bytes/,
  );
  assert.equal(
    load("", { IGGY_MQTT_AUTH_JWT_HMAC_SECRET: "k".repeat(32) }).auth.jwt_hmac_secret.length,
    32,
  );
});

Deno.test("loadConfig() refuses an auth.jwt_default_template that names no template", () => {
  refuses(
    `[auth]\njwt_default_template = "device"`,
    {},
    "auth.jwt_default_template",
    /no \[jwt_templates.device\] table/,
  );
});

Deno.test("readJwtKeys() reads the JWKS file and the HMAC secret; null when neither is set", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/jwks.json`;
    await Deno.writeTextFile(
      path,
      jwksOf(await makeSigner("RS256", "a"), await makeSigner("EdDSA", "b")),
    );
    const env = {
      IGGY_MQTT_AUTH_JWT_JWKS_FILE: path,
      IGGY_MQTT_AUTH_JWT_HMAC_SECRET: "s".repeat(40),
    };
    const keys = await readJwtKeys(load("", env).auth);
    assert.deepEqual(keys!.keys.map((k) => `${k.alg}:${k.kid}`), ["RS256:a", "EdDSA:b", "HS256:"]);
    assert.equal(await readJwtKeys(load("").auth), null);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("readJwtKeys() refuses a file it cannot use in one line naming the file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/jwks.json`;
    const cases: [string | null, RegExp][] = [
      [null, /^Cannot read auth.jwt_jwks_file ".*jwks.json": not found$/],
      ["{not json", /^Cannot use auth.jwt_jwks_file ".*": not JSON: /],
      [
        '{"keys": [{"kty": "oct", "k": "AA"}]}',
        /^Cannot use auth.jwt_jwks_file ".*": key 0 is a symmetric key/,
      ],
      [" ".repeat((1 << 20) + 1), /larger than 1048576 bytes/],
    ];
    for (const [text, message] of cases) {
      if (text !== null) await Deno.writeTextFile(path, text);
      const auth = load("", { IGGY_MQTT_AUTH_JWT_JWKS_FILE: path }).auth;
      await assert.rejects(
        () => readJwtKeys(auth),
        (e) => e instanceof OperatorError && message.test(e.message) && !e.message.includes("\n"),
      );
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
