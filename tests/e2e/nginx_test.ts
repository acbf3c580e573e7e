/**
 * nginx (open source, stream and http modules) in front of a gateway with the configuration of
 * docs/OPERATIONS.md "Many gateways" (`tests/fixtures/nginx/gateways.conf`), its three servers
 * replaced by this one gateway and its ports by free ones: MQTT and MQTT over TLS carry a
 * PROXY protocol v1 header, WebSocket carries X-Forwarded-For; Mosquitto's and Paho's clients,
 * each on its own loopback address, are seen by theirs. Skipped, loudly, without nginx (Debian:
 * nginx and libnginx-mod-stream), the Mosquitto clients or python3 with paho-mqtt.
 */
import assert from "node:assert/strict";
import {
  freeFixedPort,
  HAS_MOSQUITTO_CLIENTS,
  hasCommand,
  run,
  startGateway,
  waitFor,
} from "../helpers/gateway.ts";

const CONFIG = new URL("../fixtures/nginx/gateways.conf", import.meta.url).pathname;
const TLS = new URL("../fixtures/tls/", import.meta.url).pathname;
const STREAM_MODULE = "/usr/lib/nginx/modules/ngx_stream_module.so";
const HAS_NGINX = hasCommand("nginx") &&
  (() => {
    try {
      return Deno.statSync(STREAM_MODULE).isFile;
    } catch {
      return false;
    }
  })();
const HAS_PAHO = hasCommand("python3") &&
  new Deno.Command("python3", { args: ["-c", "import paho.mqtt"], stderr: "null" }).outputSync()
    .success;
const READY = HAS_NGINX && HAS_MOSQUITTO_CLIENTS && HAS_PAHO;
if (!READY) {
  console.warn(
    "WARNING: nginx with its stream module, mosquitto_pub or python3 with paho-mqtt not found; the nginx test is SKIPPED",
  );
}

const PAHO_WS = `
import sys, paho.mqtt.client as mqtt
c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="paho-ws", transport="websockets")
c.ws_set_options(path="/mqtt")
c.connect("127.0.0.1", int(sys.argv[1]), 30, bind_address="127.0.0.2")
c.loop_start()
info = c.publish("sensors/ws/data", b"from 127.0.0.2", qos=1)
info.wait_for_publish(10)
sys.exit(0 if info.is_published() else 3)
`;

Deno.test("docs/OPERATIONS.md shows the nginx configuration this test runs", async () => {
  const docs = await Deno.readTextFile(new URL("../../docs/OPERATIONS.md", import.meta.url));
  const block = /^```nginx\n([\s\S]*?)^```$/m.exec(docs);
  assert.ok(block !== null, "an nginx block in OPERATIONS.md");
  assert.equal(block[1], await Deno.readTextFile(CONFIG));
});

Deno.test({
  name:
    "nginx with proxy_protocol (v1) and X-Forwarded-For: the gateway sees the clients' own addresses",
  ignore: !READY,
  fn: async () => {
    const tlsPort = freeFixedPort();
    const gw = await startGateway({
      env: {
        IGGY_MQTT_LISTENERS_TLS: `127.0.0.1:${tlsPort}`,
        IGGY_MQTT_LISTENERS_TLS_CERT_FILE: `${TLS}server.crt`,
        IGGY_MQTT_LISTENERS_TLS_KEY_FILE: `${TLS}server.key`,
        IGGY_MQTT_LISTENERS_WS: "127.0.0.1:0",
        IGGY_MQTT_LISTENERS_PROXY_PROTOCOL_FROM: "127.0.0.1",
        IGGY_MQTT_AUTH_ANONYMOUS_SOURCES: "127.0.0.2",
      },
    });
    const dir = await Deno.makeTempDir({ prefix: "nginx-test-" });
    const [mqtt, mqtts, ws] = [freeFixedPort(), freeFixedPort(), freeFixedPort()];
    const conf = (await Deno.readTextFile(CONFIG))
      .replace(/ +server 10\.0\.0\.1[23]:\d+[^;]*;\n/g, "")
      .replace("10.0.0.11:1883", `127.0.0.1:${gw.port}`)
      .replace("10.0.0.11:8883", `127.0.0.1:${tlsPort}`)
      .replace("10.0.0.11:8083", `127.0.0.1:${gw.wsPort}`)
      .replace("listen 1883", `listen 127.0.0.1:${mqtt}`)
      .replace("listen 8883", `listen 127.0.0.1:${mqtts}`)
      .replace("listen 8083", `listen 127.0.0.1:${ws}`);
    await Deno.writeTextFile(`${dir}/gateways.conf`, conf);
    await Deno.writeTextFile(
      `${dir}/nginx.conf`,
      `load_module ${STREAM_MODULE};\npid ${dir}/nginx.pid;\nerror_log ${dir}/error.log;\n` +
        `daemon off;\nevents {}\ninclude ${dir}/gateways.conf;\n`,
    );
    const nginx = new Deno.Command("nginx", {
      args: ["-p", dir, "-c", `${dir}/nginx.conf`, "-e", `${dir}/error.log`],
      stdout: "null",
      stderr: "piped",
    }).spawn();
    const stderr = new Response(nginx.stderr).text();
    try {
      await waitFor(
        async () => {
          try {
            (await Deno.connect({ hostname: "127.0.0.1", port: ws })).close();
            return true;
          } catch {
            return false;
          }
        },
        10_000,
        "nginx to listen",
      );
      const pub = (source: string, port: number, tls: boolean) =>
        run("mosquitto_pub", [
          ...["-A", source, "-h", "127.0.0.1", "-p", String(port), "-q", "1"],
          ...(tls ? ["--cafile", `${TLS}server.crt`, "--insecure"] : []),
          ...["-t", "sensors/nginx/data", "-m", `from ${source}`],
        ], { timeoutMs: 15_000 });
      const tcp = await pub("127.0.0.2", mqtt, false);
      assert.equal(tcp.code, 0, tcp.stderr);
      const secure = await pub("127.0.0.2", mqtts, true);
      assert.equal(secure.code, 0, secure.stderr);
      const paho = await run("python3", ["-c", PAHO_WS, String(ws)], { timeoutMs: 20_000 });
      assert.equal(paho.code, 0, paho.stderr);
      assert.notEqual((await pub("127.0.0.4", mqtt, false)).code, 0);
      const refused = gw.logs.map((l) => JSON.parse(l)).filter((l) =>
        l.msg === "Connection refused"
      );
      assert.deepEqual(refused.map((l) => [l.remote, l.listener, l.reason]), [
        ["127.0.0.4", "tcp", "anonymous access is not allowed from 127.0.0.4"],
      ]);
    } finally {
      try {
        nginx.kill("SIGTERM");
      } catch { /* exited already: its log says why */ }
      await nginx.status;
      const log = await stderr;
      if (log.trim() !== "") console.warn(log);
      await gw.stop();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
