/**
 * MQTT over WebSocket (`listeners.ws`, issue 40): a real MQTT.js client over `ws://` subscribes,
 * publishes QoS 0 and 1 and receives its own messages and one published over TCP by
 * mosquitto_pub; a 100 KB payload split over several frames arrives intact; upgrades on another
 * path, without the `mqtt` subprotocol, or from an origin not allowed are refused with an HTTP
 * status; a text frame closes the connection.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { HAS_MOSQUITTO_CLIENTS, run, startGateway, waitFor } from "../helpers/gateway.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
const WS_ENV = { IGGY_MQTT_LISTENERS_WS: "127.0.0.1:0" };

Deno.test({
  name:
    "WebSocket: MQTT.js over ws:// subscribes, publishes QoS 0 and 1, receives its own and a TCP client's messages; 100 KB arrives intact",
  ...opts,
  async fn() {
    // 100 KB in one PUBLISH: over the default limits.max_packet_bytes (8092).
    const gw = await startGateway({
      env: { ...WS_ENV, IGGY_MQTT_LIMITS_MAX_PACKET_BYTES: "200000" },
    });
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
        const r = await run("mosquitto_pub", [
          "-p",
          String(gw.port),
          "-t",
          "sensors/tcp/data",
          "-m",
          "from tcp",
          "-q",
          "1",
        ]);
        assert.equal(r.code, 0, r.stderr);
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
