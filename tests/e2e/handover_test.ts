/**
 * A restart as a handover: two gateways on one Iggy (a real Iggy when `IGGY_TEST_ADDRESS` is set,
 * else the fake Iggy of tests/helpers/fake_iggy on a real socket, dialect 0.11 as Iggy 0.9 speaks
 * it). A subscriber with a stored session is on gateway A while a publisher publishes through B;
 * A stops as on SIGTERM. MQTT.js and Paho (MQTT 5) must get DISCONNECT 0x9C Use another server
 * with the Server Reference of `mqtt5.server_reference` (0x8B Server shutting down without one),
 * Paho 3.1.1 a closed connection; each reconnects where it was sent, finds its session present
 * and gets every message published before, during and after the stop at least once: no gap.
 * Then the bound: a stop whose Iggy stops answering still ends within `gateway.drain_timeout_ms`
 * and says so, the gateway process exits 0 within it on SIGTERM, and in forward mode the stop
 * waits for the send in flight to the upstream Iggy.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";
import { hasCommand, startGateway, type TestGateway, waitFor } from "../helpers/gateway.ts";
import { spawnGateway } from "../helpers/process.ts";

const SCRIPT = new URL("../clients/paho_handover.py", import.meta.url).pathname;
const HAS_PAHO = hasCommand("python3") &&
  new Deno.Command("python3", { args: ["-c", "import paho.mqtt"], stderr: "null" }).outputSync()
    .success;
if (!HAS_PAHO) {
  console.warn("WARNING: python3 with paho-mqtt missing; the Paho handovers are SKIPPED.");
}
const ADDRESS = Deno.env.get("IGGY_TEST_ADDRESS") ?? "";
const COUNT = 60;

/** One Iggy for both gateways: the real one named, else a fake one started here. */
function iggy(): { env: (id: string) => Record<string, string>; close(): Promise<void> } {
  const node = ADDRESS === "" ? new FakeNode({ dialect: "0.11", store: new FakeStore() }) : null;
  const address = node?.listen() ?? ADDRESS;
  const suffix = crypto.randomUUID().slice(0, 8);
  return {
    env: (id) => ({
      IGGY_MQTT_GATEWAY_BACKEND: "iggy",
      IGGY_MQTT_GATEWAY_ID: id,
      IGGY_MQTT_IGGY_ADDRESS: address,
      IGGY_MQTT_IGGY_USERNAME: Deno.env.get("IGGY_TEST_USERNAME") || "iggy",
      IGGY_MQTT_IGGY_PASSWORD: Deno.env.get("IGGY_TEST_PASSWORD") || "iggy",
      IGGY_MQTT_SESSION_STORE_STREAM: `mqtt_gateway_${suffix}`,
    }),
    close: async () => await node?.close(),
  };
}

/** Publishes m`from` .. m`to - 1` at QoS 1 through `gw`, each awaited to its PUBACK. */
async function publishRange(gw: TestGateway, from: number, to: number): Promise<void> {
  const pub = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
    clientId: `pub-${from}`,
    reconnectPeriod: 0,
  });
  for (let i = from; i < to; i++) {
    await pub.publishAsync(`sensors/s${i % 4}/data`, `m${i}`, { qos: 1 });
  }
  await pub.endAsync();
}

/** A and B on one Iggy; A sends its MQTT 5 clients to B when `reference` is set. */
async function pair(reference: boolean) {
  const log = iggy();
  const b = await startGateway({ env: log.env("gw-b") });
  const a = await startGateway({
    env: {
      ...log.env("gw-a"),
      ...(reference ? { IGGY_MQTT_MQTT5_SERVER_REFERENCE: `127.0.0.1:${b.port}` } : {}),
    },
  });
  return {
    a,
    b,
    async close() {
      await a.stop();
      await b.stop();
      await log.close();
    },
  };
}

for (const reference of [true, false]) {
  Deno.test({
    name: `MQTT.js 5, stored session: a stop says ${
      reference ? "0x9C and where to go" : "0x8B"
    }; resumed on the other gateway, no message is missing`,
    async fn() {
      const { a, b, close } = await pair(reference);
      try {
        const options = {
          protocolVersion: 5 as const,
          clientId: "handover-js",
          clean: false,
          reconnectPeriod: 0,
          properties: { sessionExpiryInterval: 3600 },
        };
        const got = new Set<string>();
        const first = await mqtt.connectAsync(`mqtt://127.0.0.1:${a.port}`, options);
        first.on("message", (_t, p) => got.add(p.toString()));
        const told = new Promise<mqtt.IDisconnectPacket>((r) => first.on("disconnect", r));
        await first.subscribeAsync("sensors/+/data", { qos: 1 });
        await publishRange(b, 0, COUNT / 2);
        await waitFor(() => got.size === COUNT / 2, 10_000, "the first half on A");
        const stopping = a.gateway.stop();
        await publishRange(b, COUNT / 2, COUNT);
        const d = await told;
        await stopping;
        first.end(true);
        assert.equal(d.reasonCode, reference ? 0x9c : 0x8b);
        assert.equal(d.properties?.serverReference, reference ? `127.0.0.1:${b.port}` : undefined);
        const port = reference ? Number(d.properties!.serverReference!.split(":")[1]) : b.port;
        const second = await mqtt.connectAsync(`mqtt://127.0.0.1:${port}`, options);
        second.on("message", (_t, p) => got.add(p.toString()));
        await waitFor(() => got.size === COUNT, 10_000, "every message after the handover");
        await second.endAsync();
      } finally {
        await close();
      }
    },
  });
}

for (const version of ["5", "3.1.1"]) {
  Deno.test({
    name: `Paho ${version}, stored session: a stop ${
      version === "5" ? "says 0x9C and where to go" : "closes"
    }; resumed on the other gateway, no message is missing`,
    ignore: !HAS_PAHO,
    async fn() {
      const { a, b, close } = await pair(true);
      const child = new Deno.Command("python3", {
        args: [
          SCRIPT,
          String(a.port),
          String(b.port),
          version,
          `handover-paho-${version}`,
          `${COUNT}`,
        ],
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const lines: string[] = [];
      const reading = child.stdout.pipeThrough(new TextDecoderStream()).pipeTo(
        new WritableStream({
          write: (chunk) => void lines.push(...chunk.split("\n").filter(Boolean)),
        }),
      );
      const stderr = new Response(child.stderr).text();
      try {
        await waitFor(() => lines.includes("subscribed"), 10_000, "Paho's SUBACK");
        await publishRange(b, 0, COUNT / 2);
        const stopping = a.gateway.stop();
        await publishRange(b, COUNT / 2, COUNT);
        await stopping;
        const status = await child.status;
        await reading;
        assert.ok(status.success, `${lines.join("\n")}\n${await stderr}`);
        const told = version === "5" ? `disconnect 156 127.0.0.1:${b.port}` : "disconnect - -";
        assert.deepEqual(lines, ["subscribed", told, "connack session_present=1", "complete"]);
      } finally {
        try {
          child.kill();
        } catch { /* exited */ }
        await close();
      }
    },
  });
}

Deno.test({
  name:
    "a stop whose Iggy stops answering still ends within gateway.drain_timeout_ms, and says what was not stored",
  async fn() {
    let holding = false;
    const node = new FakeNode({
      dialect: "0.11",
      store: new FakeStore(),
      hook: () => holding ? "hold" : undefined,
    });
    const gw = await startGateway({
      env: {
        IGGY_MQTT_GATEWAY_BACKEND: "iggy",
        IGGY_MQTT_IGGY_ADDRESS: node.listen(),
        IGGY_MQTT_IGGY_PASSWORD: "iggy",
        IGGY_MQTT_GATEWAY_DRAIN_TIMEOUT_MS: "1000",
      },
    });
    try {
      const sub = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        protocolVersion: 5,
        clientId: "held",
        clean: false,
        reconnectPeriod: 0,
        properties: { sessionExpiryInterval: 3600 },
      });
      const got = new Set<string>();
      sub.on("message", (_t, p) => got.add(p.toString()));
      const told = new Promise<mqtt.IDisconnectPacket>((r) => sub.on("disconnect", r));
      await sub.subscribeAsync("sensors/+/data", { qos: 1 });
      await publishRange(gw, 0, 10);
      await waitFor(() => got.size === 10, 10_000, "delivery");
      holding = true; // from here Iggy applies and never answers: positions cannot be confirmed
      const started = performance.now();
      await gw.gateway.stop();
      const took = performance.now() - started;
      assert.ok(took < 1000 + 250, `the stop took ${took} ms`);
      assert.equal((await told).reasonCode, 0x8b);
      sub.end(true);
      const errors = gw.logs.map((l) => JSON.parse(l)).filter((l) => l.level === "error");
      assert.ok(
        errors.some((l) => l.msg.startsWith("Stop reached gateway.drain_timeout_ms")),
        JSON.stringify(errors),
      );
    } finally {
      node.releaseHeld();
      await node.close();
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "SIGTERM to the gateway process: an MQTT 5 client is told 0x9C and where to go, the process exits 0 within gateway.drain_timeout_ms",
  async fn() {
    const node = new FakeNode({ dialect: "0.11", store: new FakeStore() });
    const gw = await spawnGateway({
      IGGY_MQTT_GATEWAY_BACKEND: "iggy",
      IGGY_MQTT_IGGY_ADDRESS: node.listen(),
      IGGY_MQTT_IGGY_PASSWORD: "iggy",
      IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "true",
      IGGY_MQTT_LOG_AUTO_CREATE: "true",
      IGGY_MQTT_GATEWAY_DRAIN_TIMEOUT_MS: "3000",
      IGGY_MQTT_MQTT5_SERVER_REFERENCE: "mqtt.example.com:1883",
    });
    try {
      const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        protocolVersion: 5,
        clientId: "sigterm",
        clean: false,
        reconnectPeriod: 0,
        properties: { sessionExpiryInterval: 3600 },
      });
      const got = new Promise<void>((r) => c.on("message", () => r()));
      const told = new Promise<mqtt.IDisconnectPacket>((r) => c.on("disconnect", r));
      await c.subscribeAsync("sigterm/#", { qos: 1 });
      await c.publishAsync("sigterm/a", "before the stop", { qos: 1 });
      await got;
      const started = performance.now();
      const status = await gw.stop();
      const took = performance.now() - started;
      const d = await told;
      c.end(true);
      assert.equal(status.code, 0);
      assert.ok(took < 3000, `the process took ${took} ms to exit`);
      assert.deepEqual([d.reasonCode, d.properties?.serverReference], [
        0x9c,
        "mqtt.example.com:1883",
      ]);
      const lines = gw.output.join("").split("\n").filter(Boolean).map((l) => JSON.parse(l));
      assert.ok(lines.some((l) => l.msg === "Gateway stopped" && l.stop_ms < 3000));
      assert.ok(
        !lines.some((l) => l.level === "error"),
        JSON.stringify(lines.filter((l) => l.level === "error")),
      );
    } finally {
      await gw.stop();
      await node.close();
    }
  },
});

Deno.test({
  name:
    "a stop in forward mode waits for the send in flight to the upstream Iggy, within the bound",
  async fn() {
    let holding = true;
    const store = new FakeStore();
    const node = new FakeNode({
      dialect: "0.11",
      store,
      hook: (req) => holding && req.code === 101 ? "hold" : undefined, // 101: SendMessages
    });
    const gw = await startGateway({
      env: {
        IGGY_MQTT_FORWARD_ENABLED: "true",
        IGGY_MQTT_FORWARD_LINGER_MS: "5",
        IGGY_MQTT_IGGY_ADDRESS: node.listen(),
        IGGY_MQTT_IGGY_PROTOCOL: "0.11",
        IGGY_MQTT_IGGY_PASSWORD: "iggy",
        IGGY_MQTT_GATEWAY_DRAIN_TIMEOUT_MS: "5000",
      },
    });
    try {
      const pub = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, { reconnectPeriod: 0 });
      for (let i = 0; i < 20; i++) await pub.publishAsync("sensors/s1/data", `f${i}`, { qos: 1 });
      await pub.endAsync();
      await waitFor(() => node.heldCount > 0, 5000, "a send to the upstream in flight");
      let stopped = false;
      const stopping = gw.gateway.stop().then(() => stopped = true);
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(stopped, false, "the stop waits for the upstream's answer");
      holding = false;
      node.releaseHeld();
      await stopping;
      const upstream = store.payloads("sensors", "sensor_data", 1).concat(
        store.payloads("sensors", "sensor_data", 2),
        store.payloads("sensors", "sensor_data", 3),
      );
      assert.deepEqual(upstream, Array.from({ length: 20 }, (_, i) => `f${i}`));
      assert.ok(!gw.logs.some((l) => JSON.parse(l).level === "error"));
    } finally {
      holding = false;
      node.releaseHeld();
      await gw.stop();
      await node.close();
    }
  },
});
