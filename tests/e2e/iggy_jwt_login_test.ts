/**
 * Login tokens in Iggy mode, against a real Iggy server (`IGGY_TEST_ADDRESS`, as
 * iggy_gateway_test.ts): a device with no Iggy user logs in with a token, the gateway's own
 * Iggy account appends its readings, and the token's rights are the ones checked. Without
 * IGGY_TEST_ADDRESS every test here is ignored, and a warning says so.
 */
import assert from "node:assert/strict";
import { HAS_MOSQUITTO_CLIENTS, run, startGateway } from "../helpers/gateway.ts";
import { claimsFor, jwksOf, makeSigner, signToken } from "../helpers/jwt.ts";

const ADDRESS = Deno.env.get("IGGY_TEST_ADDRESS") ?? "";
const USER = Deno.env.get("IGGY_TEST_USERNAME") || "iggy";
const PASS = Deno.env.get("IGGY_TEST_PASSWORD") || "iggy";
const ignore = ADDRESS === "" || !HAS_MOSQUITTO_CLIENTS;
if (ADDRESS === "") {
  console.warn("WARNING: IGGY_TEST_ADDRESS is not set; the Iggy-mode token login test is SKIPPED.");
}
const opts = { ignore };
const SUFFIX = crypto.randomUUID().slice(0, 8);
const STREAM = `fleet_${SUFFIX}`;

const MAP = `
default_stream = "${STREAM}"
default_topic = "other"
[[rule]]
mqtt_topic = 'devices/([^/]+)(?:/.*)?$'
stream = '${STREAM}'
topic = '$1'
`;

const TEMPLATES = `
[jwt_templates.device.permissions.streams.${STREAM}.topics."{sub}"]
send_messages = true
`;

Deno.test({
  name:
    "Iggy mode: a token's device, no Iggy user, publishes through the gateway's own account where its template allows, 0x87 elsewhere",
  ...opts,
  async fn() {
    const signer = await makeSigner("EdDSA", "ed-1");
    const dir = await Deno.makeTempDir();
    await Deno.writeTextFile(`${dir}/jwks.json`, jwksOf(signer));
    const gw = await startGateway({
      toml: TEMPLATES,
      map: MAP,
      env: {
        IGGY_MQTT_GATEWAY_BACKEND: "iggy",
        IGGY_MQTT_GATEWAY_ID: `jwt-${SUFFIX}`,
        IGGY_MQTT_IGGY_ADDRESS: ADDRESS,
        IGGY_MQTT_IGGY_USERNAME: USER,
        IGGY_MQTT_IGGY_PASSWORD: PASS,
        IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "false",
        IGGY_MQTT_AUTH_FAILURE_BACKOFF_MS: "0",
        IGGY_MQTT_AUTH_JWT_JWKS_FILE: `${dir}/jwks.json`,
      },
    });
    try {
      const token = await signToken(signer, claimsFor("meter-7", { mqtt_template: "device" }));
      const pub = (topic: string) =>
        run("mosquitto_pub", [
          ...["-h", "127.0.0.1", "-p", String(gw.port), "-V", "mqttv5", "-q", "1"],
          ...["-i", "meter-7", "-u", "meter-7", "-P", token, "-t", topic, "-m", "230.1"],
        ], { timeoutMs: 15_000 });
      const ok = await pub("devices/meter-7/volts");
      assert.equal(ok.code, 0, ok.stderr);
      const info = await gw.view.log.getTopic(STREAM, "meter-7");
      assert.ok(info !== null, "auto-created by the gateway's account");
      const got: string[] = [];
      for (let partition = 0; partition < info.partitions; partition++) {
        const msgs = await gw.view.log.poll(
          { stream: STREAM, topic: "meter-7", partition },
          0,
          10,
        );
        got.push(...msgs.map((m) => new TextDecoder().decode(m.payload)));
      }
      assert.deepEqual(got, ["230.1"]);
      const denied = await pub("devices/meter-8/volts");
      assert.match(denied.stderr + denied.stdout, /not authori[sz]ed/i);
      assert.equal(await gw.view.log.getTopic(STREAM, "meter-8"), null);
      // The same name with a password is an Iggy login, and Iggy has no such user.
      const asUser = await run("mosquitto_pub", [
        ...["-h", "127.0.0.1", "-p", String(gw.port), "-i", "meter-7b", "-u", "meter-7"],
        ...["-P", "not-a-token", "-t", "devices/meter-7/volts", "-m", "1"],
      ]);
      assert.match(asUser.stderr, /bad user name or password|not authori[sz]ed/i);
    } finally {
      await gw.stop();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
