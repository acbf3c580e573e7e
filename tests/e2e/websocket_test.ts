/**
 * MQTT over WebSocket (`listeners.ws`, issue 40): a real MQTT.js client over `ws://` subscribes,
 * publishes QoS 0 and 1 and receives its own messages and one published over TCP by
 * mosquitto_pub; a 100 KB payload split over several frames arrives intact; upgrades on another
 * path, without the `mqtt` subprotocol, or from an origin not allowed are refused with an HTTP
 * status; a text frame closes the connection.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import {
  connectPacket,
  HAS_MOSQUITTO_CLIENTS,
  publishPacket,
  run,
  startGateway,
  testEnv,
  waitFor,
} from "../helpers/gateway.ts";
import { BROWSER, Browser } from "../helpers/browser.ts";
import { mqttjsPing } from "./_subscribe_helpers.ts";

const opts = {};

/** mosquitto_pub, over TCP: "from tcp" to sensors/tcp/data at QoS 1. */
async function tcpPublish(port: number): Promise<void> {
  const args = ["-p", String(port), "-t", "sensors/tcp/data", "-m", "from tcp", "-q", "1"];
  const r = await run("mosquitto_pub", args);
  assert.equal(r.code, 0, r.stderr);
}
const WS_ENV = { IGGY_MQTT_LISTENERS_WS: "127.0.0.1:0" };

Deno.test({
  name:
    "WebSocket: MQTT.js over ws:// subscribes, publishes QoS 0 and 1, receives its own and a TCP client's messages; 100 KB arrives intact",
  ...opts,
  async fn() {
    // 100 KB in one PUBLISH: under the default limits.max_packet_bytes (1 MiB).
    const gw = await startGateway({ env: WS_ENV });
    try {
      const wsPort = gw.wsPort!;
      const got: { topic: string; payload: Uint8Array; qos: number }[] = [];
      const c = await mqtt.connectAsync(`ws://127.0.0.1:${wsPort}/mqtt`, {
        reconnectPeriod: 0,
        protocolVersion: 5,
      });
      c.on("message", (topic, payload, p) => got.push({ topic, payload, qos: p.qos }));
      await c.subscribeAsync("sensors/+/data", { qos: 1 });
      await c.publishAsync("sensors/ws/data", "zero", { qos: 0 });
      await c.publishAsync("sensors/ws/data", "one", { qos: 1 });
      const big = new Uint8Array(100_000).map((_, i) => (i * 31) % 256);
      await c.publishAsync("sensors/big/data", Buffer.from(big), { qos: 1 });
      if (HAS_MOSQUITTO_CLIENTS) {
        await tcpPublish(gw.port);
      }
      const expect = HAS_MOSQUITTO_CLIENTS ? 4 : 3;
      await waitFor(() => got.length >= expect, 5000, "messages over ws");
      const text = (t: string) =>
        got.filter((g) => g.topic === t).map((g) => new TextDecoder().decode(g.payload));
      assert.deepEqual(text("sensors/ws/data").sort(), ["one", "zero"]);
      assert.deepEqual([...got.find((g) => g.topic === "sensors/big/data")!.payload], [...big]);
      if (HAS_MOSQUITTO_CLIENTS) assert.deepEqual(text("sensors/tcp/data"), ["from tcp"]);
      await c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "WebSocket: another path 404, no mqtt subprotocol 400, a plain GET 426, an origin not allowed 403; a text frame closes the connection",
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: { ...WS_ENV, IGGY_MQTT_LISTENERS_WS_ALLOWED_ORIGINS: "https://dash.example" },
    });
    try {
      const wsPort = gw.wsPort!;
      const base = `127.0.0.1:${wsPort}`;
      const upgrade = (path: string, headers: Record<string, string>) =>
        fetch(`http://${base}${path}`, {
          headers: {
            connection: "Upgrade",
            upgrade: "websocket",
            "sec-websocket-version": "13",
            "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
            ...headers,
          },
        }).then(async (r) => (await r.body?.cancel(), r.status));
      const ok = { "sec-websocket-protocol": "mqtt", origin: "https://dash.example" };
      assert.equal(await upgrade("/other", ok), 404);
      assert.equal(await upgrade("/mqtt", { origin: "https://dash.example" }), 400);
      assert.equal(await upgrade("/mqtt", { ...ok, origin: "https://evil.example" }), 403);
      const plain = await fetch(`http://${base}/mqtt`);
      await plain.body?.cancel();
      assert.equal(plain.status, 426);
      const refused = gw.logs.map((l) => JSON.parse(l)).filter((l) =>
        l.msg === "Connection refused"
      );
      assert.deepEqual(refused.map((l) => [l.level, l.remote, l.listener]), [
        ...Array(4).fill(["warn", "127.0.0.1", "ws"]),
      ], "each refused upgrade: one warn line with peer and listener");
      assert.match(refused[2].reason, /origin https:\/\/evil\.example is not in/);
      const ws = new WebSocket(`ws://${base}/mqtt`, {
        protocols: ["mqtt"],
        headers: { origin: "https://dash.example" },
      } as unknown as string[]);
      await new Promise((resolve, reject) => {
        ws.onopen = resolve;
        ws.onerror = reject;
      });
      assert.equal(ws.protocol, "mqtt");
      const closed = new Promise<number>((resolve) => ws.onclose = (e) => resolve(e.code));
      ws.send("not binary");
      assert.equal(await closed, 1003);
    } finally {
      await gw.stop();
    }
  },
});

/** MQTT.js's browser build from Deno's npm cache (the version deno.json pins). */
async function mqttBrowserBuild(): Promise<string> {
  const info = JSON.parse(
    new TextDecoder().decode(
      (await new Deno.Command(Deno.execPath(), { args: ["info", "--json"] }).output()).stdout,
    ),
  );
  const pinned = JSON.parse(await Deno.readTextFile(new URL("../../deno.json", import.meta.url)))
    .imports.mqtt as string; // npm:mqtt@x.y.z
  const version = pinned.split("@").at(-1);
  const path = `${info.npmCache}/registry.npmjs.org/mqtt/${version}/dist/mqtt.min.js`;
  return await Deno.readTextFile(path);
}

Deno.test({
  name:
    "WebSocket (headless Chromium, MQTT.js browser build over ws://): subscribes, publishes QoS 0 and 1, receives its own and a mosquitto_pub message" +
    (BROWSER === null ? " [SKIPPED: chromium not installed]" : ""),
  ignore: BROWSER === null,
  ...opts,
  async fn() {
    const gw = await startGateway({ env: WS_ENV });
    const lib = await mqttBrowserBuild();
    const page = `<!doctype html><meta charset="utf-8"><title>ws test</title>
<script src="/mqtt.min.js"></script>
<script>
window.result = { got: [], subscribed: false, error: null };
const c = mqtt.connect("ws://127.0.0.1:${gw.wsPort}/mqtt", { reconnectPeriod: 0 });
c.on("error", (e) => window.result.error = String(e));
c.on("message", (t, p) => window.result.got.push(t + "=" + new TextDecoder().decode(p)));
c.on("connect", () => c.subscribe("sensors/+/data", { qos: 1 }, () => {
  window.result.subscribed = true;
  c.publish("sensors/browser/data", "q0", { qos: 0 });
  c.publish("sensors/browser/data", "q1", { qos: 1 });
}));
</script>`;
    const server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      (req) =>
        new URL(req.url).pathname === "/mqtt.min.js"
          ? new Response(lib, { headers: { "content-type": "text/javascript" } })
          : new Response(page, { headers: { "content-type": "text/html" } }),
    );
    const browser = await Browser.open(`http://127.0.0.1:${server.addr.port}/`);
    try {
      type Result = { got: string[]; subscribed: boolean; error: string | null };
      const result = () => browser.evaluate<Result>("window.result");
      await waitFor(
        async () => (await result())?.subscribed === true,
        15_000,
        "browser subscribed",
      );
      if (HAS_MOSQUITTO_CLIENTS) {
        await tcpPublish(gw.port);
      }
      const want = [
        "sensors/browser/data=q0",
        "sensors/browser/data=q1",
        ...(HAS_MOSQUITTO_CLIENTS ? ["sensors/tcp/data=from tcp"] : []),
      ];
      await waitFor(async () => (await result()).got.length >= want.length, 10_000, "messages");
      const r = await result();
      assert.equal(r.error, null);
      assert.deepEqual(r.got.sort(), want);
    } finally {
      await browser.close();
      await server.shutdown();
      await gw.stop();
    }
  },
});

Deno.test({
  name: "WebSocket: a PUBLISH split over three frames, and two packets in one frame, arrive whole",
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: { ...WS_ENV, IGGY_MQTT_LIMITS_MAX_PACKET_BYTES: "200000" },
    });
    try {
      const sub = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, { reconnectPeriod: 0 });
      const got: Uint8Array[] = [];
      sub.on("message", (_t, p) => got.push(p));
      await sub.subscribeAsync("sensors/+/data", { qos: 0 });
      const ws = new WebSocket(`ws://127.0.0.1:${gw.wsPort}/mqtt`, "mqtt");
      ws.binaryType = "arraybuffer";
      const frames: Uint8Array[] = [];
      ws.onmessage = (e) => frames.push(new Uint8Array(e.data));
      await new Promise((resolve, reject) => {
        ws.onopen = resolve;
        ws.onerror = reject;
      });
      const big = new Uint8Array(100_000).map((_, i) => (i * 7) % 256);
      const connect = connectPacket("ws-raw");
      const publish = publishPacket("sensors/raw/data", big, 0, 0);
      const small = publishPacket("sensors/raw/data", new TextEncoder().encode("tail"), 0, 0);
      ws.send(connect.subarray(0, 5)); // CONNECT over two frames
      ws.send(connect.subarray(5));
      await waitFor(() => frames.length > 0, 3000, "CONNACK");
      ws.send(publish.subarray(0, 30_000)); // the PUBLISH over three frames
      ws.send(publish.subarray(30_000, 70_000));
      const last = new Uint8Array(publish.length - 70_000 + small.length);
      last.set(publish.subarray(70_000));
      last.set(small, publish.length - 70_000); // its end and another PUBLISH in one frame
      ws.send(last);
      await waitFor(() => got.length === 2, 5000, "both PUBLISHes");
      assert.deepEqual([...got[0]], [...big]);
      assert.equal(new TextDecoder().decode(got[1]), "tail");
      ws.close();
      await sub.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

const FIX = new URL("../fixtures/tls/", import.meta.url).pathname;
const HAS_PAHO = new Deno.Command("python3", { args: ["-c", "import paho.mqtt"], stderr: "null" })
  .outputSync().success;

Deno.test({
  name:
    "secure WebSocket (listeners.wss, the TLS listener's certificate): MQTT.js over wss:// and paho-mqtt with transport=websockets publish and receive" +
    (HAS_PAHO ? "" : " [paho part SKIPPED: python3 -m pip install paho-mqtt]"),
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: {
        IGGY_MQTT_LISTENERS_WSS: "127.0.0.1:0",
        IGGY_MQTT_LISTENERS_TLS_CERT_FILE: `${FIX}server.crt`,
        IGGY_MQTT_LISTENERS_TLS_KEY_FILE: `${FIX}server.key`,
      },
    });
    try {
      const ca = await Deno.readTextFile(`${FIX}server.crt`);
      const c = await mqtt.connectAsync(`wss://localhost:${gw.wssPort}/mqtt`, {
        reconnectPeriod: 0,
        ca,
      });
      const got: string[] = [];
      c.on("message", (t, p) => got.push(`${t}=${new TextDecoder().decode(p)}`));
      await c.subscribeAsync("sensors/+/data", { qos: 1 });
      await c.publishAsync("sensors/wss/data", "secure", { qos: 1 });
      await waitFor(() => got.length === 1, 5000, "own message over wss");
      assert.deepEqual(got, ["sensors/wss/data=secure"]);
      if (HAS_PAHO) {
        const script = `
import sys, time, ssl
import paho.mqtt.client as mqtt
got = []
c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="paho-wss", transport="websockets")
c.tls_set(ca_certs=sys.argv[2])
c.ws_set_options(path="/mqtt")
c.on_message = lambda c, u, m: got.append(m.payload.decode())
c.on_connect = lambda c, u, f, rc, p: c.subscribe("sensors/+/data", qos=1)
c.connect("localhost", int(sys.argv[1]))
c.loop_start()
time.sleep(0.5)
c.publish("sensors/paho/data", b"over wss", qos=1).wait_for_publish(5)
deadline = time.time() + 5
while "over wss" not in got and time.time() < deadline: time.sleep(0.05)
print(",".join(got))
c.loop_stop()
`;
        const r = await run("python3", ["-c", script, String(gw.wssPort), `${FIX}server.crt`]);
        assert.equal(r.code, 0, r.stderr);
        assert.match(r.stdout, /over wss/);
        await waitFor(() => got.length === 2, 5000, "paho's message reaches MQTT.js");
      }
      await c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "secure WebSocket reload: new connections get the new certificate (open wss connections are closed, their clients reconnect), a bad pair is refused and the current one keeps serving, the same pair again closes nothing; accepts count per listener",
  ...opts,
  async fn() {
    const env = (cert: string, key: string) => ({
      IGGY_MQTT_LISTENERS_WSS: "127.0.0.1:0",
      IGGY_MQTT_LISTENERS_TLS_CERT_FILE: `${FIX}${cert}`,
      IGGY_MQTT_LISTENERS_TLS_KEY_FILE: `${FIX}${key}`,
    });
    const gw = await startGateway({ env: env("server.crt", "server.key") });
    const oldCa = await Deno.readTextFile(`${FIX}server.crt`);
    const newCa = await Deno.readTextFile(`${FIX}server2.crt`);
    const url = `wss://localhost:${gw.wssPort}/mqtt`;
    const before = await mqtt.connectAsync(url, { ca: oldCa, reconnectPeriod: 0 });
    let closed = false;
    before.on("close", () => closed = true);
    const { loadConfig } = await import("../../src/config/load.ts");
    const reloadWith = (cert: string, key: string) =>
      gw.gateway.reload(loadConfig({
        text: "",
        source: "reload",
        env: { ...testEnv(gw.dir), ...env(cert, key), IGGY_MQTT_LISTENERS_WSS: "127.0.0.1:0" },
      }));
    try {
      await reloadWith("server2.crt", "server2.key");
      await waitFor(() => closed, 3000, "the open wss connection closed by the reload");
      const withNew = await mqtt.connectAsync(url, { ca: newCa, reconnectPeriod: 0 });
      await withNew.endAsync();
      const withOld = await mqtt.connectAsync(url, {
        ca: oldCa,
        reconnectPeriod: 0,
        connectTimeout: 3000,
      }).then(() => "connected", (e) => String(e));
      assert.notEqual(withOld, "connected", "the old certificate is gone for new connections");
      await assert.rejects(reloadWith("README.txt", "server2.key"));
      const still = await mqtt.connectAsync(url, { ca: newCa, reconnectPeriod: 0 });
      await still.endAsync();
      const m = gw.view.metrics.connectionsAccepted;
      assert.equal(m.get({ listener: "wss" }), 3, "before, withNew, still");
      // The same pair again (a reload for the map): the listener and its connections stay.
      const kept = await mqtt.connectAsync(url, { ca: newCa, reconnectPeriod: 0 });
      let keptClosed = false;
      kept.on("close", () => keptClosed = true);
      await reloadWith("server2.crt", "server2.key"); // a bad pair did not stop the listener
      await mqttjsPing(kept);
      assert.equal(keptClosed, false, "an unchanged pair closes no wss connection");
      await kept.endAsync();
      assert.equal(m.get({ listener: "tcp" }), 0);
    } finally {
      await before.endAsync();
      await gw.stop();
    }
  },
});
