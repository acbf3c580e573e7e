/**
 * Devices that log in with X.509 certificates (`listeners.tls_client_auth`): the certificate's
 * name is the principal, looked up as a `[[users]]` entry without a password, with that user's
 * permissions. And the attacks: a certificate with the right name from another CA, an expired
 * one, a revoked one (CRL), a valid one whose name is no user, none at all. Certificates are
 * made by `openssl` for each run (tests/helpers/client_pki.ts); mosquitto_pub/sub are the
 * operator's clients, MQTT.js the one whose refusals can be read exactly.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { hashPassword } from "../../src/access/password.ts";
import {
  HAS_MOSQUITTO_CLIENTS,
  run,
  startGateway,
  type TestGateway,
  waitFor,
} from "../helpers/gateway.ts";
import {
  type ClientPki,
  hasOpenssl,
  type IssuedCertificate,
  makeClientPki,
} from "../helpers/client_pki.ts";
import { tlsAttempt } from "../helpers/tls_client.ts";

const opts = {};
const FIX = new URL("../fixtures/tls/", import.meta.url).pathname;
const HAS_OPENSSL = await hasOpenssl();
if (!HAS_OPENSSL) {
  console.warn("WARNING: openssl not found; the client certificate tests are SKIPPED");
}

/** sensor-7 may send and poll on stream `sensors` only; alice logs in with a password. */
const USERS = `
[[users]]
username = "sensor-7"
[users.permissions.streams.sensors]
send_messages = true
poll_messages = true

[[users]]
username = "sensor-8"
[users.permissions.global]
send_messages = true
poll_messages = true

[[users]]
username = "alice"
password_hash = "${await hashPassword("alice-secret", 1000)}"
[users.permissions.global]
send_messages = true
poll_messages = true
`;

/** The device certificates of one run. */
interface Devices {
  pki: ClientPki;
  /** CN sensor-7, SAN DNS:sensor-7.fleet.example, from the device CA. */
  valid: IssuedCertificate;
  /** CN sensor-7, expired in 2020. */
  expired: IssuedCertificate;
  /** CN sensor-8, revoked (in the CRL). */
  revoked: IssuedCertificate;
  /** CN sensor-7 from another CA. */
  forged: IssuedCertificate;
  /** CN nobody: verifies, but no user has that name. */
  stranger: IssuedCertificate;
  crl: string;
}

async function makeDevices(): Promise<Devices> {
  const pki = await makeClientPki();
  const ca = pki.deviceCa;
  const valid = await ca.issue({ cn: "sensor-7", san: ["DNS:sensor-7.fleet.example"] });
  const expired = await ca.issue({
    cn: "sensor-7",
    startDate: "20200101000000Z",
    endDate: "20200102000000Z",
  });
  const revoked = await ca.issue({ cn: "sensor-8" });
  const stranger = await ca.issue({ cn: "nobody" });
  const forged = await pki.foreignCa.issue({ cn: "sensor-7" });
  const crl = await ca.revoke(revoked);
  return { pki, valid, expired, revoked, forged, stranger, crl };
}

function clientAuthEnv(d: Devices, mode: "optional" | "require"): Record<string, string> {
  return {
    IGGY_MQTT_LISTENERS_TCP: "",
    IGGY_MQTT_LISTENERS_TLS: "127.0.0.1:0",
    IGGY_MQTT_LISTENERS_TLS_CERT_FILE: `${FIX}server.crt`,
    IGGY_MQTT_LISTENERS_TLS_KEY_FILE: `${FIX}server.key`,
    IGGY_MQTT_LISTENERS_TLS_CLIENT_AUTH: mode,
    IGGY_MQTT_LISTENERS_TLS_CLIENT_CA_FILE: d.pki.deviceCa.crt,
    IGGY_MQTT_LISTENERS_TLS_CRL_FILE: d.crl,
    IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "false",
  };
}

/** Runs `body` with a fresh PKI and a gateway in `mode`; skipped loudly without openssl. */
function withGateway(
  mode: "optional" | "require",
  body: (gw: TestGateway, d: Devices) => Promise<void>,
): () => Promise<void> {
  return async () => {
    const d = await makeDevices();
    const gw = await startGateway({ env: clientAuthEnv(d, mode), toml: USERS });
    try {
      await body(gw, d);
    } finally {
      await gw.stop();
      await d.pki.remove();
    }
  };
}

/** MQTT.js over TLS with `cert` (or none), connected (throws when refused). */
async function connectWith(
  gw: TestGateway,
  cert: IssuedCertificate | null,
  o: mqtt.IClientOptions = {},
): Promise<mqtt.MqttClient> {
  const { client, error } = await tlsAttempt(gw.port, cert, o);
  if (error === null) return client;
  await client.endAsync(true);
  throw new Error(`refused: ${error.message}`);
}

/** How a connection attempt ended: null (CONNACK 0) or its error (see `tlsAttempt`). */
async function refusal(
  gw: TestGateway,
  cert: IssuedCertificate | null,
  o: mqtt.IClientOptions = {},
): Promise<{ code?: number | string; message: string } | null> {
  const { client, error } = await tlsAttempt(gw.port, cert, o);
  await client.endAsync(true);
  return error;
}

/** Counter value of `mqtt_connections_refused_total{reason="…"}` on the gateway. */
function refusedCount(gw: TestGateway, reason: string): number {
  const text = gw.view.prometheus();
  const line = text.split("\n").find((l) =>
    l.startsWith("mqtt_connections_refused_total") && l.includes(`reason="${reason}"`)
  );
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1));
}

/** mosquitto_pub/_sub's TLS arguments for `cert` against the gateway. */
function mosquittoTls(gw: TestGateway, cert: IssuedCertificate): string[] {
  return [
    ...["-h", "localhost", "-p", String(gw.port), "--cafile", `${FIX}server.crt`],
    ...["--cert", cert.crt, "--key", cert.key],
  ];
}

Deno.test({
  name: "tls_client_auth = require: mosquitto_sub and mosquitto_pub with --cert/--key publish " +
    "and subscribe as the certificate's user, within that user's permissions",
  ignore: !HAS_OPENSSL || !HAS_MOSQUITTO_CLIENTS,
  ...opts,
  fn: withGateway("require", async (gw, d) => {
    const sub = new Deno.Command("mosquitto_sub", {
      args: [...mosquittoTls(gw, d.valid), "-t", "sensors/s7/data", "-q", "1", "-C", "1"],
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const routed = () => gw.view.exactSubscriptions("sensors/s7/data") !== undefined;
    await waitFor(routed, 10_000, "mosquitto_sub's subscription");
    const pub = await run("mosquitto_pub", [
      ...mosquittoTls(gw, d.valid),
      ...["-t", "sensors/s7/data", "-q", "1", "-m", "21.5", "-i", "sensor-7-pub"],
    ]);
    assert.equal(pub.code, 0, pub.stderr);
    const got = await sub.output();
    assert.equal(new TextDecoder().decode(got.stdout).trim(), "21.5");

    // The stored message was published by the certificate's user: mqtt.client_id is the
    // device's, and the principal's rights held (building/… is another stream: denied).
    const denied = await run("mosquitto_pub", [
      ...mosquittoTls(gw, d.valid),
      ...["-t", "building/north/room/1/temp", "-q", "1", "-m", "x", "-V", "mqttv5"],
    ]);
    assert.match(denied.stderr + denied.stdout, /not authori[sz]ed/i, "PUBACK 0x87 reported");
    const c = await connectWith(gw, d.valid, { protocolVersion: 5, clientId: "sensor-7-a" });
    try {
      await assert.rejects(
        c.publishAsync("building/north/room/1/temp", "x", { qos: 1 }),
        (e: { code?: number }) => e.code === 0x87,
      );
      await c.publishAsync("sensors/s7/data", "ok", { qos: 1 });
    } finally {
      await c.endAsync();
    }
  }),
});

Deno.test({
  name: "tls_client_auth = require: another CA's certificate with the right name, an expired " +
    "one, none at all and a revoked one are refused right after the handshake; a valid one " +
    "whose name is no user gets CONNACK 5 (3.1.1) / 0x87 (MQTT 5); the gateway keeps serving",
  ignore: !HAS_OPENSSL,
  ...opts,
  fn: withGateway("require", async (gw, d) => {
    const forged = await refusal(gw, d.forged);
    assert.ok(forged !== null, "a certificate from another CA is refused");
    const expired = await refusal(gw, d.expired);
    assert.ok(expired !== null, "an expired certificate is refused");
    const none = await refusal(gw, null);
    assert.ok(none !== null, "no certificate is refused under require");
    assert.equal(refusedCount(gw, "tls_client_cert_unverified"), 2, "the two that do not verify");
    assert.equal(refusedCount(gw, "tls_client_cert_missing"), 1, "and the one without");
    assert.equal(gw.view.connections, 0, "none of them became a connection");

    assert.ok(await refusal(gw, d.revoked) !== null, "a revoked certificate is refused");
    assert.equal(refusedCount(gw, "tls_client_cert_revoked"), 1);

    const stranger = await refusal(gw, d.stranger);
    assert.equal(stranger?.code, 5, `3.1.1: ${stranger?.message}`);
    const stranger5 = await refusal(gw, d.stranger, { protocolVersion: 5 });
    assert.equal(stranger5?.code, 0x87, `MQTT 5: ${stranger5?.message}`);

    // Nothing of that touched the gateway: the real device still gets in.
    assert.equal(await refusal(gw, d.valid), null);
  }),
});

Deno.test({
  name: "tls_client_auth = optional: username/password still works without a certificate, a " +
    "certificate logs in as its user without a password, one that does not verify is refused",
  ignore: !HAS_OPENSSL,
  ...opts,
  fn: withGateway("optional", async (gw, d) => {
    assert.equal(
      await refusal(gw, null, { username: "alice", password: "alice-secret" }),
      null,
      "alice with her password, no certificate",
    );
    const wrong = await refusal(gw, null, { username: "alice", password: "guess" });
    assert.equal(wrong?.code, 4, "a wrong password is still refused (bad user name or password)");
    const anonymous = await refusal(gw, null);
    assert.ok(anonymous !== null, "no certificate and no user: refused (no anonymous access)");

    const c = await connectWith(gw, d.valid, { clientId: "sensor-7-b" });
    try {
      await c.publishAsync("sensors/s7/data", "ok", { qos: 1 });
    } finally {
      await c.endAsync();
    }
    assert.ok(await refusal(gw, d.forged) !== null, "another CA's certificate is refused");
    assert.equal(refusedCount(gw, "tls_client_cert_unverified"), 1);
    assert.ok(await refusal(gw, d.revoked) !== null, "a revoked certificate is refused");
    assert.equal(refusedCount(gw, "tls_client_cert_revoked"), 1);
  }),
});

Deno.test({
  name: "SIGHUP reload takes a new client CA file and CRL for new handshakes",
  ignore: !HAS_OPENSSL,
  ...opts,
  async fn() {
    const d = await makeDevices();
    // The listener starts trusting the foreign CA only, from files that are then replaced.
    const caFile = `${d.pki.dir}/client-ca.pem`;
    const crlFile = `${d.pki.dir}/client.crl`;
    await Deno.copyFile(d.pki.foreignCa.crt, caFile);
    await Deno.copyFile(await d.pki.foreignCa.writeCrl(), crlFile);
    const env = {
      ...clientAuthEnv(d, "require"),
      IGGY_MQTT_LISTENERS_TLS_CLIENT_CA_FILE: caFile,
      IGGY_MQTT_LISTENERS_TLS_CRL_FILE: crlFile,
    };
    const gw = await startGateway({ env, toml: USERS });
    try {
      assert.ok(await refusal(gw, d.valid) !== null, "the device CA is not trusted yet");
      assert.equal(await refusal(gw, d.forged), null, "the foreign CA is");
      await Deno.copyFile(d.pki.deviceCa.crt, caFile);
      await Deno.copyFile(d.crl, crlFile);
      await gw.gateway.reload(gw.config);
      assert.equal(await refusal(gw, d.valid), null, "after the reload the device CA is trusted");
      assert.ok(await refusal(gw, d.forged) !== null, "and the foreign CA no longer");
      assert.ok(await refusal(gw, d.revoked) !== null, "the new CRL applies");
      assert.equal(refusedCount(gw, "tls_client_cert_revoked"), 1);
    } finally {
      await gw.stop();
      await d.pki.remove();
    }
  },
});
