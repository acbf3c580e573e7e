/**
 * MQTT over TLS with a test certificate (tests/fixtures/tls, CN=localhost, 127.0.0.1).
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import {
  HAS_MOSQUITTO_CLIENTS,
  hasCommand,
  run,
  startGateway,
  testEnv,
  waitFor,
} from "../helpers/gateway.ts";

const opts = {};
const FIX = new URL("../fixtures/tls/", import.meta.url).pathname;

function tlsEnv(): Record<string, string> {
  return {
    IGGY_MQTT_LISTENERS_TCP: "",
    IGGY_MQTT_LISTENERS_TLS: "127.0.0.1:0",
    IGGY_MQTT_LISTENERS_TLS_CERT_FILE: `${FIX}server.crt`,
    IGGY_MQTT_LISTENERS_TLS_KEY_FILE: `${FIX}server.key`,
  };
}

Deno.test({
  name: "TLS listener: MQTT.js publishes QoS 1 over TLS with the test CA and the message is stored",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: tlsEnv() });
    const client = await mqtt.connectAsync(`mqtts://localhost:${gw.port}`, {
      ca: await Deno.readTextFile(`${FIX}server.crt`),
      reconnectPeriod: 0,
      clientId: "tls-1",
    });
    try {
      await client.publishAsync("sensors/tls/data", "secure", { qos: 1 });
      const info = await gw.view.log.getTopic("sensors", "sensor_data");
      assert.ok(info);
      let n = 0;
      for (let p = 0; p < info.partitions; p++) {
        n += (await gw.view.log.poll(
          { stream: "sensors", topic: "sensor_data", partition: p },
          0,
          10,
        )).length;
      }
      assert.equal(n, 1);
    } finally {
      await client.endAsync();
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "TLS listener: a client that does not trust the certificate fails cleanly and the gateway keeps serving",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: tlsEnv() });
    try {
      const bad = await mqtt.connectAsync(`mqtts://localhost:${gw.port}`, {
        reconnectPeriod: 0,
        connectTimeout: 3000,
      })
        .then(() => "connected", (e) => String(e));
      assert.notEqual(bad, "connected");
      const said = (l: string) => l.includes("the client does not trust the gateway's certificate");
      await waitFor(() => gw.logs.some(said), 5000, "the refusal's line");
      const good = await mqtt.connectAsync(`mqtts://localhost:${gw.port}`, {
        ca: await Deno.readTextFile(`${FIX}server.crt`),
        reconnectPeriod: 0,
      });
      await good.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "TLS listener: mosquitto_pub --cafile publishes QoS 1",
  ignore: !HAS_MOSQUITTO_CLIENTS,
  ...opts,
  async fn() {
    const gw = await startGateway({ env: tlsEnv() });
    try {
      const args = [
        "-h",
        "localhost",
        "-p",
        String(gw.port),
        "--cafile",
        `${FIX}server.crt`,
        "-q",
        "1",
        "-t",
        "a/b",
        "-m",
        "x",
      ];
      const ok = await run("mosquitto_pub", args);
      assert.equal(ok.code, 0, ok.stderr);
    } finally {
      await gw.stop();
    }
  },
});

const HAS_OPENSSL = hasCommand("openssl");
if (!HAS_OPENSSL) console.warn("WARNING: openssl not found; the TLS 1.1 refusal test is SKIPPED");

/** openssl s_client's output for a handshake offering only `version`, at security level 0. */
async function handshake(port: number, version: "-tls1_1" | "-tls1_2"): Promise<string> {
  // SECLEVEL=0: OpenSSL 3 would otherwise refuse to offer TLS 1.1 itself, and the test would
  // see the client's refusal, not the server's.
  const args = [
    "s_client",
    "-connect",
    `127.0.0.1:${port}`,
    version,
    "-cipher",
    "DEFAULT:@SECLEVEL=0",
  ];
  const r = await run("openssl", args, { stdin: "", timeoutMs: 5000 });
  return r.stdout + r.stderr;
}

Deno.test({
  name: "TLS listener: the server refuses a TLS 1.1 handshake with an alert; TLS 1.2 completes",
  ignore: !HAS_OPENSSL,
  ...opts,
  async fn() {
    const gw = await startGateway({ env: tlsEnv() });
    try {
      const old = await handshake(gw.port, "-tls1_1");
      assert.match(old, /Protocol\s*:\s*TLSv1\.1/, "the client offered TLS 1.1");
      assert.match(old, /SSL alert number \d+/, "the server answered with an alert");
      assert.match(old, /Cipher is \(NONE\)/, "no session was set up");
      const current = await handshake(gw.port, "-tls1_2");
      assert.match(current, /Cipher is ECDHE-/, "the same client gets TLS 1.2");
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "TLS: a socket that never completes the handshake is dropped at connect_timeout_ms and frees its connection slot",
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: {
        ...tlsEnv(),
        IGGY_MQTT_LIMITS_CONNECT_TIMEOUT_MS: "400",
        IGGY_MQTT_LIMITS_MAX_CONNECTIONS: "1",
      },
    });
    const raw = await Deno.connect({ hostname: "127.0.0.1", port: gw.port });
    try {
      // The peer sees the close (node:tls drops the handshake), and the slot serves the next.
      const closed = await raw.read(new Uint8Array(16)).then((n) => n === null, () => true);
      assert.ok(closed, "the silent TLS socket was not closed");
      assert.ok(gw.view.metrics.keepAliveExpired.get() >= 1);
      const good = await mqtt.connectAsync(`mqtts://localhost:${gw.port}`, {
        ca: await Deno.readTextFile(`${FIX}server.crt`),
        reconnectPeriod: 0,
      });
      await good.endAsync();
    } finally {
      raw.close();
      await gw.stop();
    }
  },
});

Deno.test({
  name: "TLS: certificate reload keeps open connections; new connections get the new certificate",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: tlsEnv() });
    const oldCa = await Deno.readTextFile(`${FIX}server.crt`);
    const newCa = await Deno.readTextFile(`${FIX}server2.crt`);
    const before = await mqtt.connectAsync(`mqtts://localhost:${gw.port}`, {
      ca: oldCa,
      reconnectPeriod: 0,
      clientId: "before-reload",
    });
    let closed = false;
    before.on("close", () => closed = true);
    try {
      const { loadConfig } = await import("../../src/config/load.ts");
      const next = loadConfig({
        text: "",
        source: "reload",
        env: {
          ...tlsEnv(),
          IGGY_MQTT_LISTENERS_TLS_CERT_FILE: `${FIX}server2.crt`,
          IGGY_MQTT_LISTENERS_TLS_KEY_FILE: `${FIX}server2.key`,
          IGGY_MQTT_MAPPING_MAP_FILE: "config/topic-map.toml",
          IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "true",
          IGGY_MQTT_LOG_AUTO_CREATE: "true",
        },
      });
      await gw.gateway.reload(next);
      // The old connection still works.
      await before.publishAsync("sensors/r/data", "still-here", { qos: 1 });
      assert.equal(closed, false);
      // New connections see the new certificate: the old CA no longer verifies it.
      const withNew = await mqtt.connectAsync(`mqtts://localhost:${gw.port}`, {
        ca: newCa,
        reconnectPeriod: 0,
      });
      await withNew.endAsync();
      const withOld = await mqtt.connectAsync(`mqtts://localhost:${gw.port}`, {
        ca: oldCa,
        reconnectPeriod: 0,
        connectTimeout: 3000,
      }).then(() => "connected", (e) => String(e));
      assert.notEqual(withOld, "connected");
      // A bad certificate is refused and the listener keeps serving the current one.
      const bad = loadConfig({
        text: "",
        source: "reload",
        env: {
          ...tlsEnv(),
          IGGY_MQTT_LISTENERS_TLS_CERT_FILE: `${FIX}README.txt`,
          IGGY_MQTT_MAPPING_MAP_FILE: "config/topic-map.toml",
          IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "true",
          IGGY_MQTT_LOG_AUTO_CREATE: "true",
        },
      });
      await assert.rejects(gw.gateway.reload(bad));
      const still = await mqtt.connectAsync(`mqtts://localhost:${gw.port}`, {
        ca: newCa,
        reconnectPeriod: 0,
      });
      await still.endAsync();
    } finally {
      await before.endAsync();
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "reload refuses a change of listeners.tls_client_auth or tls_identity, naming the key: the listener keeps the mode it started with",
  async fn() {
    const env = {
      IGGY_MQTT_LISTENERS_TLS: "127.0.0.1:0",
      IGGY_MQTT_LISTENERS_TLS_CERT_FILE: `${FIX}server.crt`,
      IGGY_MQTT_LISTENERS_TLS_KEY_FILE: `${FIX}server.key`,
    };
    const gw = await startGateway({ env });
    const { loadConfig } = await import("../../src/config/load.ts");
    const reloadWith = (extra: Record<string, string>) =>
      gw.gateway.reload(
        loadConfig({ text: "", source: "reload", env: { ...testEnv(gw.dir), ...env, ...extra } }),
      );
    try {
      await assert.rejects(
        reloadWith({
          IGGY_MQTT_LISTENERS_TLS_CLIENT_AUTH: "optional",
          IGGY_MQTT_LISTENERS_TLS_CLIENT_CA_FILE: `${FIX}server.crt`,
        }),
        /listeners\.tls_client_auth.*changed from "none" to "optional": restart/,
      );
      await assert.rejects(
        reloadWith({ IGGY_MQTT_LISTENERS_TLS_IDENTITY: "san_dns" }),
        /listeners\.tls_identity/,
      );
      await reloadWith({}); // the same settings still reload
    } finally {
      await gw.stop();
    }
  },
});
