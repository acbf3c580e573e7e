/**
 * A real HAProxy (Debian's `haproxy`) in front of a gateway, with the configuration of
 * docs/OPERATIONS.md "Many gateways" as it is there (`tests/fixtures/haproxy/gateways.cfg`;
 * its three servers all point at this one gateway): MQTT and MQTT over TLS carry a PROXY
 * protocol v2 header (and, in a second run, v1: `send-proxy`), WebSocket carries
 * X-Forwarded-For. The clients are Mosquitto's and Paho's, each bound to its own loopback
 * address (127.0.0.2 and up) while HAProxy reaches the gateway from 127.0.0.1, the only source
 * trusted: the anonymous rule, the per-source rate and the refusal log must see the clients'
 * addresses, and a PROXY header sent straight to the gateway from elsewhere is refused.
 * Skipped, loudly, without haproxy, the Mosquitto clients or python3 with paho-mqtt.
 */
import assert from "node:assert/strict";
import {
  freeFixedPort,
  HAS_MOSQUITTO_CLIENTS,
  hasCommand,
  run,
  startGateway,
  type TestGateway,
  waitFor,
} from "../helpers/gateway.ts";

const CONFIG = new URL("../fixtures/haproxy/gateways.cfg", import.meta.url).pathname;
const SERVER_CRT = new URL("../fixtures/tls/", import.meta.url).pathname + "server.crt";
const SERVER_KEY = new URL("../fixtures/tls/", import.meta.url).pathname + "server.key";
const HAS_HAPROXY = hasCommand("haproxy");
const HAS_PAHO = hasCommand("python3") &&
  new Deno.Command("python3", { args: ["-c", "import paho.mqtt"], stderr: "null" }).outputSync()
    .success;
const READY = HAS_HAPROXY && HAS_MOSQUITTO_CLIENTS && HAS_PAHO;
if (!READY) {
  console.warn(
    "WARNING: haproxy, mosquitto_pub or python3 with paho-mqtt not found; the HAProxy tests are SKIPPED",
  );
}

/** HAProxy's front ports, for the clients. */
interface Fronts {
  readonly mqtt: number;
  readonly mqtts: number;
  readonly ws: number;
}

/** Starts haproxy on `config` in front of `gw`; resolves once its MQTT front accepts. */
async function startHaproxy(config: string, gw: TestGateway) {
  const fronts: Fronts = { mqtt: freeFixedPort(), mqtts: freeFixedPort(), ws: freeFixedPort() };
  const child = new Deno.Command("haproxy", {
    args: ["-db", "-f", config],
    env: {
      MQTT_BIND: `127.0.0.1:${fronts.mqtt}`,
      MQTTS_BIND: `127.0.0.1:${fronts.mqtts}`,
      WS_BIND: `127.0.0.1:${fronts.ws}`,
      GW1: "127.0.0.1",
      GW2: "127.0.0.1",
      GW3: "127.0.0.1",
      GW_MQTT_PORT: String(gw.port),
      GW_MQTTS_PORT: String(tlsPort(gw)),
      GW_WS_PORT: String(gw.wsPort),
      GW_HTTP_PORT: String(gw.httpPort),
    },
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const stderr = new Response(child.stderr).text();
  await waitFor(
    async () => {
      try {
        (await Deno.connect({ hostname: "127.0.0.1", port: fronts.ws })).close();
        return true;
      } catch {
        return false;
      }
    },
    10_000,
    "haproxy to listen",
  );
  let stopped = false;
  return {
    fronts,
    /** Stops haproxy (once); its log: health-check changes, alerts. */
    async stop(): Promise<string> {
      try {
        if (!stopped) child.kill("SIGTERM");
      } catch { /* exited already: its log says why */ }
      stopped = true;
      await child.status;
      return await stderr;
    },
  };
}

/** The gateway's TLS port (the test helper reports its TCP port). */
function tlsPort(gw: TestGateway): number {
  return Number(gw.config.listeners.tls.split(":")[1]);
}

let clients = 0;

/** mosquitto_pub from `source` through `port` (QoS 1: exit 0 only once PUBACKed). */
function mosquittoPub(source: string, port: number, tls = false) {
  const args = ["-A", source, "-h", "127.0.0.1", "-p", String(port), "-q", "1"];
  const secure = tls ? ["--cafile", SERVER_CRT, "--insecure"] : [];
  const msg = [
    "-t",
    `sensors/${source}/data`,
    "-m",
    `from ${source}`,
    "-i",
    `pub-${source}-${++clients}`,
  ];
  return run("mosquitto_pub", [...args, ...secure, ...msg], { timeoutMs: 15_000 });
}

/** Paho (MQTT 5 over TCP, or 3.1.1 over WebSocket) from `source`: publishes QoS 1. */
const PAHO = `
import sys, paho.mqtt.client as mqtt
source, port, transport = sys.argv[1], int(sys.argv[2]), sys.argv[3]
proto = mqtt.MQTTv5 if transport == "tcp" else mqtt.MQTTv311
c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="paho-" + source, protocol=proto, transport=transport)
if transport == "websockets":
    c.ws_set_options(path="/mqtt")
c.connect("127.0.0.1", port, 30, bind_address=source)
c.loop_start()
info = c.publish("sensors/paho/data", b"from " + source.encode(), qos=1)
info.wait_for_publish(10)
ok = info.is_published()
c.disconnect()
c.loop_stop()
sys.exit(0 if ok else 3)
`;

function pahoPub(source: string, port: number, transport: "tcp" | "websockets") {
  return run("python3", ["-c", PAHO, source, String(port), transport], { timeoutMs: 20_000 });
}

function refusals(gw: TestGateway): { remote: string; listener: string; reason: string }[] {
  return gw.logs.map((l) => JSON.parse(l)).filter((l) => l.msg === "Connection refused");
}

async function gatewayBehindHaproxy(): Promise<TestGateway> {
  return await startGateway({
    env: {
      IGGY_MQTT_LISTENERS_TLS: `127.0.0.1:${freeFixedPort()}`,
      IGGY_MQTT_LISTENERS_TLS_CERT_FILE: SERVER_CRT,
      IGGY_MQTT_LISTENERS_TLS_KEY_FILE: SERVER_KEY,
      IGGY_MQTT_LISTENERS_WS: "127.0.0.1:0",
      IGGY_MQTT_LISTENERS_PROXY_PROTOCOL_FROM: "127.0.0.1",
      // Not 127.0.0.1, HAProxy's own address: it must lend nobody its rights.
      IGGY_MQTT_AUTH_ANONYMOUS_SOURCES: "127.0.0.2,127.0.0.3,127.0.0.5,127.0.0.6,127.0.0.7",
      IGGY_MQTT_LIMITS_MAX_CONNECTION_RATE_PER_SOURCE: "1", // a burst of 2 per source
    },
  });
}

const ok = (r: { code: number; stderr: string }, what: string) =>
  assert.equal(r.code, 0, `${what}: ${r.stderr}`);

Deno.test("docs/OPERATIONS.md shows the HAProxy configuration this test runs, as it is", async () => {
  const docs = await Deno.readTextFile(new URL("../../docs/OPERATIONS.md", import.meta.url));
  const block = /^```haproxy\n([\s\S]*?)^```$/m.exec(docs);
  assert.ok(block !== null, "a haproxy block in OPERATIONS.md");
  assert.equal(block[1], await Deno.readTextFile(CONFIG));
});

Deno.test({
  name:
    "HAProxy with send-proxy-v2 (and X-Forwarded-For): limits and logs see the clients' own addresses",
  ignore: !READY,
  fn: async () => {
    const gw = await gatewayBehindHaproxy();
    const haproxy = await startHaproxy(CONFIG, gw);
    try {
      const { mqtt, mqtts, ws } = haproxy.fronts;
      ok(await mosquittoPub("127.0.0.2", mqtt), "mosquitto_pub over TCP");
      ok(await mosquittoPub("127.0.0.3", mqtts, true), "mosquitto_pub over TLS");
      ok(await pahoPub("127.0.0.6", ws, "websockets"), "Paho over WebSocket");
      ok(await pahoPub("127.0.0.7", mqtt, "tcp"), "Paho MQTT 5 over TCP");
      // Not an anonymous source, although HAProxy's address is one by default.
      const stranger = await mosquittoPub("127.0.0.4", mqtt);
      assert.notEqual(stranger.code, 0);
      // Five at once from one source: over its burst of 2, whatever the other sources do.
      const burst = await Promise.all([1, 2, 3, 4, 5].map(() => mosquittoPub("127.0.0.5", mqtt)));
      const refusedInBurst = burst.filter((r) => r.code !== 0).length;
      // 3 unless a token came back meanwhile (one a second).
      assert.ok(refusedInBurst >= 1 && refusedInBurst <= 3, `${refusedInBurst} of 5 refused`);
      ok(await mosquittoPub("127.0.0.2", mqtts, true), "another source, meanwhile");

      const lines = refusals(gw);
      assert.deepEqual(lines[0], {
        ...lines[0],
        remote: "127.0.0.4",
        listener: "tcp",
        reason: "anonymous access is not allowed from 127.0.0.4",
      });
      const rated = lines.filter((l) => l.reason === "connection rate from this source exceeded");
      assert.equal(rated.length, refusedInBurst);
      assert.ok(rated.every((l) => l.remote === "127.0.0.5"));
      assert.ok(!lines.some((l) => l.remote === "127.0.0.1"), "no line names HAProxy's address");
      const m = gw.view.metrics.connectionsRefused;
      assert.equal(m.get({ reason: "rate_per_source" }), refusedInBurst);
      assert.equal(m.get({ reason: "proxy_header", listener: "tcp" }), 0);
      assert.equal(m.get({ reason: "proxy_header", listener: "tls" }), 0);
      // Every /ready check passed: no server was taken out.
      const log = await haproxy.stop();
      assert.ok(!log.includes(" is DOWN"), log);
    } finally {
      await haproxy.stop();
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "HAProxy with send-proxy (v1): the same addresses; a PROXY header straight from another source is refused",
  ignore: !READY,
  fn: async () => {
    const v1 = await Deno.makeTempFile({ suffix: ".cfg" });
    const text = await Deno.readTextFile(CONFIG);
    await Deno.writeTextFile(v1, text.replaceAll("send-proxy-v2", "send-proxy"));
    const gw = await gatewayBehindHaproxy();
    const haproxy = await startHaproxy(v1, gw);
    try {
      const { mqtt, mqtts } = haproxy.fronts;
      ok(await mosquittoPub("127.0.0.2", mqtt), "mosquitto_pub over TCP");
      ok(await mosquittoPub("127.0.0.3", mqtts, true), "mosquitto_pub over TLS");
      assert.notEqual((await mosquittoPub("127.0.0.4", mqtts, true)).code, 0);
      // Straight to the gateway from 127.0.0.8, claiming to be a trusted 127.0.0.2.
      const spoof = `
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), source_address=("127.0.0.8", 0))
s.sendall(b"PROXY TCP4 127.0.0.2 127.0.0.1 5000 1883\\r\\n\\x10\\x0c\\x00\\x04MQTT\\x04\\x02\\x00\\x3c\\x00\\x00")
s.settimeout(5)
sys.exit(0 if s.recv(16) == b"" else 4)
`;
      ok(await run("python3", ["-c", spoof, String(gw.port)]), "closed without a CONNACK");
      await waitFor(
        () =>
          gw.view.metrics.connectionsRefused.get({
            reason: "proxy_untrusted",
            listener: "tcp",
          }) === 1,
        3000,
        "the untrusted header counted",
      );
      assert.deepEqual(refusals(gw).map((l) => [l.remote, l.listener, l.reason]), [
        ["127.0.0.4", "tls", "anonymous access is not allowed from 127.0.0.4"],
        ["127.0.0.8", "tcp", "PROXY header from a source not in listeners.proxy_protocol_from"],
      ]);
    } finally {
      await haproxy.stop();
      await gw.stop();
      await Deno.remove(v1);
    }
  },
});
