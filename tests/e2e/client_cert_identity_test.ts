/**
 * `listeners.tls_identity`: which name of a verified client certificate is the user. A device
 * certificate with CN `sensor-7` and a DNS SAN `sensor-7.fleet.example` logs in as the one or
 * the other; a certificate without the chosen kind of name is no user (CONNACK 5).
 */
import assert from "node:assert/strict";
import { startGateway, type TestGateway } from "../helpers/gateway.ts";
import { hasOpenssl, type IssuedCertificate, makeClientPki } from "../helpers/client_pki.ts";
import { tlsAttempt } from "../helpers/tls_client.ts";

const FIX = new URL("../fixtures/tls/", import.meta.url).pathname;
const HAS_OPENSSL = await hasOpenssl();
if (!HAS_OPENSSL) console.warn("WARNING: openssl not found; the tls_identity tests are SKIPPED");

/** The SAN's user may send to stream `sensors`; the CN's user may only poll there. */
const USERS = `
[[users]]
username = "sensor-7.fleet.example"
[users.permissions.streams.sensors]
send_messages = true

[[users]]
username = "sensor-7"
[users.permissions.streams.sensors]
poll_messages = true
`;

/**
 * What `cert` gets: its CONNACK's refusal code, or, once in (MQTT 5), what a QoS 1 publish to
 * stream `sensors` gets: "sent" (the SAN's user may send there) or its PUBACK code (135 = 0x87:
 * the CN's user may only poll).
 */
async function outcomeFor(gw: TestGateway, cert: IssuedCertificate): Promise<string> {
  const { client: c, error } = await tlsAttempt(gw.port, cert, { protocolVersion: 5 });
  try {
    if (error !== null) return `CONNACK ${error.code ?? error.message}`;
    return await c.publishAsync("sensors/s7/data", "21.5", { qos: 1 }).then(
      () => "sent",
      (e: { code?: number }) => `PUBACK ${e.code}`,
    );
  } finally {
    await c.endAsync(true);
  }
}

for (const identity of ["cn", "san_dns"] as const) {
  Deno.test({
    name: `tls_identity = ${identity}: the certificate's ${identity} is the user, with its rights`,
    ignore: !HAS_OPENSSL,
    async fn() {
      const pki = await makeClientPki();
      const both = await pki.deviceCa.issue({
        cn: "sensor-7",
        san: ["DNS:sensor-7.fleet.example"],
      });
      const cnOnly = await pki.deviceCa.issue({ cn: "sensor-7" });
      const gw = await startGateway({
        env: {
          IGGY_MQTT_LISTENERS_TCP: "",
          IGGY_MQTT_LISTENERS_TLS: "127.0.0.1:0",
          IGGY_MQTT_LISTENERS_TLS_CERT_FILE: `${FIX}server.crt`,
          IGGY_MQTT_LISTENERS_TLS_KEY_FILE: `${FIX}server.key`,
          IGGY_MQTT_LISTENERS_TLS_CLIENT_AUTH: "require",
          IGGY_MQTT_LISTENERS_TLS_CLIENT_CA_FILE: pki.deviceCa.crt,
          IGGY_MQTT_LISTENERS_TLS_IDENTITY: identity,
          IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "false",
        },
        toml: USERS,
      });
      try {
        // CN: user "sensor-7", who may not send (0x87); SAN: "sensor-7.fleet.example", who may.
        assert.equal(await outcomeFor(gw, both), identity === "cn" ? "PUBACK 135" : "sent");
        // A certificate without a DNS SAN has no name of that kind: no user (CONNACK 0x87).
        assert.equal(
          await outcomeFor(gw, cnOnly),
          identity === "cn" ? "PUBACK 135" : "CONNACK 135",
        );
      } finally {
        await gw.stop();
        await pki.remove();
      }
    },
  });
}
