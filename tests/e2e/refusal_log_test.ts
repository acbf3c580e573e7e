/**
 * Every refused connection leaves one warn line naming the peer, the listener and the reason
 * (src/observe/refusal_log.ts), over real sockets: each TLS handshake failure (certificates
 * made by `openssl`, tests/helpers/client_pki.ts), each CONNECT refusal, the per-source rate
 * limit; and a flood of bad handshakes from one address leaves a bounded number of lines and
 * the count of what was not logged. Each gateway here sees at most five refusals from
 * 127.0.0.1, the per-source budget of one window.
 */
import assert from "node:assert/strict";
import { hashPassword } from "../../src/access/password.ts";
import { REFUSAL_LINES_PER_SOURCE } from "../../src/observe/refusal_log.ts";
import { RawClient, startGateway, type TestGateway, waitFor } from "../helpers/gateway.ts";
import {
  type ClientPki,
  hasOpenssl,
  type IssuedCertificate,
  makeClientPki,
} from "../helpers/client_pki.ts";
import { tlsAttempt } from "../helpers/tls_client.ts";

const FIX = new URL("../fixtures/tls/", import.meta.url).pathname;
const HAS_OPENSSL = await hasOpenssl();
if (!HAS_OPENSSL) console.warn("WARNING: openssl not found; the TLS refusal log tests are SKIPPED");

const USERS = `
[[users]]
username = "sensor-7"
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

interface Devices {
  pki: ClientPki;
  valid: IssuedCertificate;
  expired: IssuedCertificate;
  future: IssuedCertificate;
  revoked: IssuedCertificate;
  v1: IssuedCertificate;
  forged: IssuedCertificate;
  stranger: IssuedCertificate;
  crl: string;
}

async function makeDevices(): Promise<Devices> {
  const pki = await makeClientPki();
  const ca = pki.deviceCa;
  const at = (from: string, to: string) => ({ startDate: from, endDate: to });
  return {
    pki,
    valid: await ca.issue({ cn: "sensor-7" }),
    expired: await ca.issue({ cn: "sensor-7", ...at("20200101000000Z", "20200102000000Z") }),
    future: await ca.issue({ cn: "sensor-7", ...at("20400101000000Z", "20400102000000Z") }),
    revoked: await ca.issue({ cn: "sensor-7" }),
    v1: await ca.issueV1("sensor-7"),
    forged: await pki.foreignCa.issue({ cn: "sensor-7" }),
    stranger: await ca.issue({ cn: "nobody" }),
    crl: "",
  };
}

function tlsEnv(d: Devices, mode: "none" | "optional" | "require"): Record<string, string> {
  return {
    IGGY_MQTT_LISTENERS_TCP: "",
    IGGY_MQTT_LISTENERS_TLS: "127.0.0.1:0",
    IGGY_MQTT_LISTENERS_TLS_CERT_FILE: `${FIX}server.crt`,
    IGGY_MQTT_LISTENERS_TLS_KEY_FILE: `${FIX}server.key`,
    IGGY_MQTT_LISTENERS_TLS_CLIENT_AUTH: mode,
    IGGY_MQTT_LISTENERS_TLS_CLIENT_CA_FILE: mode === "none" ? "" : d.pki.deviceCa.crt,
    IGGY_MQTT_LISTENERS_TLS_CRL_FILE: mode === "none" ? "" : d.crl,
    IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "false",
  };
}

/** The gateway's log lines with message `msg`, parsed. */
function linesOf(gw: TestGateway, msg: string): Record<string, unknown>[] {
  return gw.logs.map((l) => JSON.parse(l)).filter((l) => l.msg === msg);
}

const refusals = (gw: TestGateway) => linesOf(gw, "Connection refused");

/**
 * Runs `attempt` and waits for the refusal line it must leave; returns that line. The next
 * attempt's line coming after it is the barrier that no second line came for this one.
 */
async function refusedWith(
  gw: TestGateway,
  attempt: () => Promise<unknown>,
): Promise<Record<string, unknown>> {
  const before = refusals(gw).length;
  await attempt();
  await waitFor(() => refusals(gw).length > before, 5000, "the refusal's log line");
  return refusals(gw)[before];
}

/** An MQTT.js attempt over TLS that must not get CONNACK 0. */
async function refusedClient(gw: TestGateway, cert: IssuedCertificate | null, o = {}) {
  const { client, error } = await tlsAttempt(gw.port, cert, o);
  await client.endAsync(true);
  assert.ok(error !== null, "the attempt is refused");
}

/** A TLS 1.1 ClientHello (no extensions), as a device stuck on an old TLS stack sends. */
function oldClientHello(): Uint8Array {
  const body = [0x03, 0x02, ...new Array(32).fill(7), 0x00, 0x00, 0x02, 0x00, 0x2f, 0x01, 0x00];
  const handshake = [0x01, 0x00, body.length >> 8, body.length & 255, ...body];
  return new Uint8Array([0x16, 0x03, 0x01, handshake.length >> 8, handshake.length, ...handshake]);
}

/** Sends the old ClientHello and reads until the gateway closes. */
async function oldTlsAttempt(port: number): Promise<void> {
  const c = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    await c.write(oldClientHello());
    const buf = new Uint8Array(64);
    while ((await c.read(buf).catch(() => null)) !== null) { /* until closed */ }
  } finally {
    try {
      c.close();
    } catch { /* closed */ }
  }
}

/** Runs `body` with a fresh PKI and a TLS gateway in `mode`; skipped loudly without openssl. */
function withGateway(
  mode: "none" | "optional" | "require",
  body: (gw: TestGateway, d: Devices) => Promise<void>,
): () => Promise<void> {
  return async () => {
    const d = await makeDevices();
    d.crl = await d.pki.deviceCa.revoke(d.revoked);
    const gw = await startGateway({ env: tlsEnv(d, mode), toml: USERS });
    try {
      await body(gw, d);
    } finally {
      await gw.stop();
      await d.pki.remove();
    }
  };
}

function assertLine(line: Record<string, unknown>, listener: string, reason: string): void {
  assert.equal(line.level, "warn");
  assert.equal(line.remote, "127.0.0.1");
  assert.equal(line.listener, listener);
  assert.equal(line.reason, reason);
}

Deno.test({
  name: "refusal log: an unknown CA, an expired, a not yet valid, a revoked and an X.509 v1 " +
    "certificate each leave one warn line with peer, listener and reason",
  ignore: !HAS_OPENSSL,
  fn: withGateway("require", async (gw, d) => {
    const cases: [IssuedCertificate, string][] = [
      [d.forged, "unknown CA"],
      [d.expired, "certificate expired"],
      [d.future, "certificate not yet valid"],
      [d.revoked, "certificate revoked"],
      [d.v1, "X.509 v1 certificate"],
    ];
    for (const [cert, reason] of cases) {
      assertLine(await refusedWith(gw, () => refusedClient(gw, cert)), "tls", reason);
    }
    assert.equal(refusals(gw).length, cases.length, "one line per refused client");
    assert.equal(gw.view.connections, 0, "none of them became a connection");
    const { client, error } = await tlsAttempt(gw.port, d.valid);
    await client.endAsync();
    assert.equal(error, null, "the real device still gets in");
    assert.equal(refusals(gw).length, cases.length, "and leaves no refusal line");
  }),
});

Deno.test({
  name: "a client certificate chain with junk after the leaf is refused with one warn line; " +
    "the gateway goes on and the real device still gets in",
  ignore: !HAS_OPENSSL,
  fn: withGateway("require", async (gw, d) => {
    // A self-made leaf followed by something that is no certificate: parsing the chain the
    // client sent threw out of the listener's event and ended the process.
    const junk =
      "-----BEGIN CERTIFICATE-----\nMAMCAQWQkVYoj3SqtNFH46K4JY9L5MBanZXDIGBszUobPv3ACfrz" +
      "dEWabGvv\n-----END CERTIFICATE-----\n";
    const chain = await Deno.makeTempFile({ suffix: ".pem" });
    try {
      await Deno.writeTextFile(chain, (await Deno.readTextFile(d.forged.crt)) + junk);
      const evil: IssuedCertificate = { crt: chain, key: d.forged.key };
      const line = await refusedWith(gw, () => refusedClient(gw, evil));
      assert.equal(line.level, "warn");
      assert.equal(line.listener, "tls");
      const { client, error } = await tlsAttempt(gw.port, d.valid);
      await client.endAsync();
      assert.equal(error, null, "the real device still gets in");
    } finally {
      await Deno.remove(chain);
    }
  }),
});

Deno.test({
  name: "refusal log: no certificate under require, an old TLS version and a certificate " +
    "whose name is no user each leave one warn line",
  ignore: !HAS_OPENSSL,
  fn: withGateway("require", async (gw, d) => {
    assertLine(
      await refusedWith(gw, () => refusedClient(gw, null)),
      "tls",
      "no client certificate",
    );
    assertLine(await refusedWith(gw, () => oldTlsAttempt(gw.port)), "tls", "protocol version");
    const stranger = await refusedWith(gw, () => refusedClient(gw, d.stranger));
    assertLine(stranger, "tls", `client certificate names "nobody", which is no user`);
    assert.equal(stranger.connack, 5);
    assert.equal(refusals(gw).length, 3);
  }),
});

Deno.test({
  name: "refusal log: a bad password (never the password itself) and a client id owned by " +
    "another principal each leave one warn line",
  ignore: !HAS_OPENSSL,
  fn: withGateway("optional", async (gw, d) => {
    const bad = await refusedWith(
      gw,
      () => refusedClient(gw, null, { username: "alice", password: "guessed-wrong-7" }),
    );
    assertLine(bad, "tls", "authentication failed (bad_credentials)");
    assert.equal(bad.username, "alice");
    assert.ok(!gw.logs.some((l) => l.includes("guessed-wrong-7")), "no password in the log");

    const alice = await tlsAttempt(gw.port, null, {
      username: "alice",
      password: "alice-secret",
      clientId: "shared-id",
    });
    assert.equal(alice.error, null);
    try {
      const taken = await refusedWith(
        gw,
        () => refusedClient(gw, d.valid, { clientId: "shared-id" }),
      );
      assertLine(taken, "tls", `client id "shared-id" belongs to another principal`);
      assert.equal(taken.principal, "sensor-7");
      assert.equal(taken.owner, "alice");
      assert.equal(taken.held_as, "live connection");
    } finally {
      await alice.client.endAsync();
    }
    assert.equal(refusals(gw).length, 2);
  }),
});

Deno.test("refusal log: the per-source connection rate limit leaves one warn line per refusal", async () => {
  const gw = await startGateway({ env: { IGGY_MQTT_LIMITS_MAX_CONNECTION_RATE_PER_SOURCE: "1" } });
  const open: RawClient[] = [];
  try {
    // A rate of 1 a second is a burst of 2: the third socket at once is over it.
    for (let i = 0; i < 2; i++) open.push(await RawClient.connect(gw.port));
    const line = await refusedWith(gw, async () => open.push(await RawClient.connect(gw.port)));
    assertLine(line, "tcp", "connection rate from this source exceeded");
    assert.equal(line.max_per_second, 1);
  } finally {
    for (const c of open) c.close();
    await gw.stop();
  }
});

/** `mqtt_…{reason="…"}` or an unlabelled series' value, 0 when absent. */
function metric(gw: TestGateway, name: string, label = ""): number {
  const line = gw.view.prometheus().split("\n").find((l) =>
    l.startsWith(name) && l.includes(label)
  );
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1));
}

Deno.test({
  name: "refusal log: 10,000 bad handshakes from one address leave five lines, one summary " +
    "with the count, and mqtt_refusal_log_suppressed_total says what was not logged",
  ignore: !HAS_OPENSSL,
  fn: withGateway("none", async (gw) => {
    const total = 10_000;
    const batch = 250;
    for (let sent = 0; sent < total; sent += batch) {
      await Promise.all(Array.from({ length: batch }, () => oldTlsAttempt(gw.port)));
    }
    const handshakes = () => metric(gw, "mqtt_connections_refused_total", "tls_handshake");
    await waitFor(() => handshakes() === total, 10_000, "every handshake refused");
    const logged = REFUSAL_LINES_PER_SOURCE;
    assert.equal(refusals(gw).length, logged, "the first lines of the window, no more");
    for (const l of refusals(gw)) assertLine(l, "tls", "protocol version");
    assert.equal(metric(gw, "mqtt_refusal_log_suppressed_total"), total - logged);
    assert.equal(gw.view.connections, 0);
    await gw.stop(); // the window has not ended: stopping reports what it held back
    const [summary, ...more] = linesOf(gw, "Connection refusals not logged (rate limit)");
    assert.equal(more.length, 0, "one summary");
    assert.equal(summary.remote, "127.0.0.1");
    assert.equal(summary.not_logged, total - logged);
    assert.deepEqual(summary.reasons, { "protocol version": total - logged });
    const warns = gw.logs.filter((l) => l.includes('"level":"warn"'));
    assert.ok(warns.length <= logged + 2, `a bounded number of warn lines: ${warns.length}`);
  }),
});
