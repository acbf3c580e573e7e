/**
 * The TCP listener's socket layers (`listeners.tcp_socket_layer`) under real clients: a QoS 1 /
 * QoS 0 load and large messages on both epoll and node:net; what happens under the strict
 * permission set (no FFI);
 * and the epoll layer out of file descriptors.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { connectRaw, RawClient, startGateway, waitFor } from "../helpers/gateway.ts";
import { spawnGateway } from "../helpers/process.ts";
import { ownStderrLines, ROOT, STACK_FRAME } from "../helpers/cli.ts";
import { removeStore } from "../helpers/store.ts";
import { partitionForKey } from "../../src/mapping/mod.ts";

const opts = {};
const DENO = Deno.execPath();

for (const layer of ["epoll", "node"]) {
  Deno.test({
    name:
      `${layer} layer: MQTT.js publishes 10,000 QoS 1 and 10,000 QoS 0 messages; every QoS 1 is acknowledged, all are stored, a QoS 1 subscriber gets them all`,
    ...opts,
    async fn() {
      const gw = await startGateway({ env: { IGGY_MQTT_LISTENERS_TCP_SOCKET_LAYER: layer } });
      assert.ok(gw.logs.some((l) => l.includes(`"tcp_socket_layer":"${layer}"`)));
      const url = `mqtt://127.0.0.1:${gw.port}`;
      const sub = await mqtt.connectAsync(url, { clientId: "load-sub", reconnectPeriod: 0 });
      const pub = await mqtt.connectAsync(url, { clientId: "load-pub", reconnectPeriod: 0 });
      try {
        let received = 0;
        const seen = new Set<string>();
        sub.on("message", (_t, payload) => {
          received++;
          seen.add(payload.toString());
        });
        await sub.subscribeAsync("sensors/load/data", { qos: 1 });
        const n = 10_000;
        const acks: Promise<unknown>[] = [];
        for (let i = 0; i < n; i++) {
          acks.push(pub.publishAsync("sensors/load/data", `q1-${i}`, { qos: 1 }));
          pub.publish("sensors/load/data", `q0-${i}`, { qos: 0 });
          if (acks.length % 500 === 0) await Promise.all(acks.slice(-500));
        }
        await Promise.all(acks);
        const address = {
          stream: "sensors",
          topic: "sensor_data",
          partition: partitionForKey("sensor_load", 3),
        };
        let stored = 0;
        await waitFor(
          async () => {
            stored = 0;
            for (let off = 0;;) {
              const msgs = await gw.view.log.poll(address, off, 1000);
              if (msgs.length === 0) break;
              stored += msgs.length;
              off += msgs.length;
            }
            return stored >= 2 * n;
          },
          20_000,
          "every publish stored",
        );
        assert.equal(stored, 2 * n);
        await waitFor(() => received >= 2 * n, 20_000, `the subscriber's ${2 * n} messages`);
        assert.equal(seen.size, 2 * n, "each message once");
      } finally {
        await pub.endAsync();
        await sub.endAsync();
        await gw.stop();
      }
    },
  });

  Deno.test({
    name:
      `${layer} layer: 40 messages of 600 KB reach a subscriber byte for byte (writes larger than the socket buffer)`,
    ...opts,
    async fn() {
      const gw = await startGateway({
        env: {
          IGGY_MQTT_LISTENERS_TCP_SOCKET_LAYER: layer,
          IGGY_MQTT_LIMITS_MAX_PACKET_BYTES: String(1 << 20),
        },
      });
      const url = `mqtt://127.0.0.1:${gw.port}`;
      const sub = await mqtt.connectAsync(url, { clientId: "big-sub", reconnectPeriod: 0 });
      const pub = await mqtt.connectAsync(url, { clientId: "big-pub", reconnectPeriod: 0 });
      try {
        const got: Buffer[] = [];
        sub.on("message", (_t, payload) => got.push(payload));
        await sub.subscribeAsync("sensors/big/data", { qos: 1 });
        const payload = (i: number) => Buffer.alloc(600_000, i);
        for (let i = 0; i < 40; i++) {
          await pub.publishAsync("sensors/big/data", payload(i), { qos: 1 });
        }
        await waitFor(() => got.length >= 40, 30_000, "40 large messages");
        for (let i = 0; i < 40; i++) assert.ok(got[i].equals(payload(i)), `message ${i} intact`);
      } finally {
        await pub.endAsync();
        await sub.endAsync();
        await gw.stop();
      }
    },
  });
}

for (const layer of ["epoll", "node"]) {
  Deno.test({
    name:
      `${layer} layer: limits.max_connections holds: sockets beyond it are closed and counted, and a freed slot is served again`,
    ...opts,
    async fn() {
      const gw = await startGateway({
        env: { IGGY_MQTT_LISTENERS_TCP_SOCKET_LAYER: layer, IGGY_MQTT_LIMITS_MAX_CONNECTIONS: "5" },
      });
      const open: RawClient[] = [];
      try {
        for (let i = 0; i < 5; i++) open.push(await connectRaw(gw.port, `max-${i}`));
        const extra = await Promise.all([0, 1, 2].map(() => RawClient.connect(gw.port)));
        for (const c of extra) assert.ok(await c.closedByPeer(), "over the limit: closed");
        const metrics = await (await fetch(`http://127.0.0.1:${gw.httpPort}/metrics`)).text();
        assert.match(metrics, /mqtt_connections_refused_total\{reason="max_connections"\} 3/);
        open.shift()!.close();
        await waitFor(() => gw.view.connections === 4, 5000, "the slot to be freed");
        open.push(await connectRaw(gw.port, "max-again"));
      } finally {
        for (const c of open) c.close();
        await gw.stop();
      }
    },
  });
}

/** The strict permission set of `deno task start` (no FFI). */
const NO_FFI = ["-P=gateway"];

function gatewayEnv(store: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    IGGY_MQTT_LISTENERS_TCP: "127.0.0.1:0",
    IGGY_MQTT_LISTENERS_HTTP: "",
    IGGY_MQTT_LISTENERS_WS: "", // the quick start config binds 8083
    IGGY_MQTT_EMBEDDED_PATH: store,
    IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "true",
    IGGY_MQTT_LIMITS_MAX_CONNECTION_RATE_PER_SOURCE: "0",
    ...extra,
  };
}

/** Reads the child's stdout into `out` (JSON log lines). */
function collect(stream: ReadableStream<Uint8Array>, out: string[]): void {
  (async () => {
    for await (const c of stream.pipeThrough(new TextDecoderStream())) out.push(c);
  })().catch(() => {});
}

function startedLine(out: string[]): Record<string, unknown> | null {
  const line = out.join("").split("\n").find((l) => l.includes('"Gateway started"'));
  return line === undefined ? null : JSON.parse(line);
}

Deno.test({
  name:
    "under the strict set (no FFI): auto serves on node:net and says why in one log line; epoll refuses to start with one line naming the key and the set to use",
  ...opts,
  async fn() {
    await Deno.mkdir(`${ROOT}data`, { recursive: true });
    const store = `data/socket-layer-${crypto.randomUUID()}.db`;
    try {
      const child = new Deno.Command(DENO, {
        args: ["run", ...NO_FFI, "main.ts", "run"],
        cwd: ROOT,
        env: gatewayEnv(store),
        stdout: "piped",
        stderr: "null",
      }).spawn();
      const out: string[] = [];
      collect(child.stdout, out);
      try {
        await waitFor(() => startedLine(out) !== null, 60_000, "the gateway to start");
        const started = startedLine(out)!;
        assert.equal(started.tcp_socket_layer, "node");
        const fallback = out.join("").split("\n").filter((l) => l.includes("uses node:net"));
        assert.equal(fallback.length, 1);
        assert.match(fallback[0], /FFI is not permitted/);
        const c = await RawClient.connect(started.tcp as number);
        c.close();
      } finally {
        child.kill("SIGTERM");
        assert.equal((await child.status).code, 0);
      }
      const r = await new Deno.Command(DENO, {
        args: ["run", ...NO_FFI, "main.ts", "run"],
        cwd: ROOT,
        env: gatewayEnv(store, { IGGY_MQTT_LISTENERS_TCP_SOCKET_LAYER: "epoll" }),
      }).output();
      const stderr = new TextDecoder().decode(r.stderr);
      assert.equal(r.code, 1, stderr);
      assert.doesNotMatch(stderr, STACK_FRAME);
      assert.deepEqual(ownStderrLines(stderr).length, 1, stderr);
      assert.match(
        ownStderrLines(stderr)[0],
        /listeners\.tcp_socket_layer = "epoll" cannot be used: FFI is not permitted; run under the permission set "gateway-epoll"/,
      );
    } finally {
      await removeStore(`${ROOT}${store}`);
    }
  },
});

/** CPU time (user + system, clock ticks) the process `pid` has used. */
async function cpuTicks(pid: number): Promise<number> {
  const stat = await Deno.readTextFile(`/proc/${pid}/stat`);
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return Number(f[11]) + Number(f[12]);
}

Deno.test({
  name:
    "epoll layer out of file descriptors: connections beyond the limit are shed and counted, the gateway does not spin, and serves again once descriptors are free",
  ignore: Deno.build.os !== "linux",
  ...opts,
  async fn() {
    await Deno.mkdir(`${ROOT}data`, { recursive: true });
    const store = `data/socket-layer-${crypto.randomUUID()}.db`;
    const child = new Deno.Command("prlimit", {
      args: ["--nofile=160", DENO, "run", "-P=gateway-epoll", "main.ts", "run"],
      cwd: ROOT,
      env: gatewayEnv(store, {
        IGGY_MQTT_LISTENERS_TCP_SOCKET_LAYER: "epoll",
        IGGY_MQTT_LISTENERS_HTTP: "127.0.0.1:0",
        IGGY_MQTT_LISTENERS_WS: "", // the quick start config binds 8083
      }),
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const out: string[] = [];
    collect(child.stdout, out);
    const clients: Deno.TcpConn[] = [];
    try {
      await waitFor(() => startedLine(out) !== null, 60_000, "the gateway to start");
      const port = startedLine(out)!.tcp as number;
      for (let i = 0; i < 250; i++) {
        clients.push(await Deno.connect({ hostname: "127.0.0.1", port }));
      }
      await waitFor(
        () => out.join("").includes("out of file descriptors"),
        10_000,
        "a shed connection",
      );
      // Shed connections are closed by the gateway: their reads end.
      const closed = await Promise.all(clients.map((c) =>
        Promise.race([
          c.read(new Uint8Array(16)).then((n) => n === null, () => true),
          new Promise<boolean>((r) => setTimeout(() => r(false), 2000)),
        ])
      ));
      assert.ok(closed.some((x) => x), "some connections were closed at once");
      assert.ok(closed.some((x) => !x), "the others stay open");
      const before = await cpuTicks(child.pid);
      await new Promise((r) => setTimeout(r, 1000)); // real time: CPU use over 1 s is measured
      const spent = (await cpuTicks(child.pid)) - before;
      assert.ok(spent < 50, `no spin: ${spent} ticks of CPU in 1 s while out of descriptors`);
      for (const c of clients.splice(0)) c.close();
      // Once the gateway has seen the closes, its descriptors are free: it serves again (a
      // connection it still sheds meanwhile is closed without CONNACK: try again).
      let connack: Uint8Array | null = null;
      await waitFor(
        async () => {
          const again = await RawClient.connect(port);
          try {
            await again.send([0x10, 12, 0, 4, 0x4d, 0x51, 0x54, 0x54, 4, 2, 0, 30, 0, 0]);
            connack = await again.readExactly(4);
          } finally {
            again.close();
          }
          return connack !== null;
        },
        10_000,
        "a CONNACK once the clients closed",
      );
      assert.deepEqual(connack && [...connack], [0x20, 2, 0, 0], "served again");
      const http = startedLine(out)!.http as number;
      const metrics = await (await fetch(`http://127.0.0.1:${http}/metrics`)).text();
      const shed = /mqtt_connections_refused_total\{reason="fd_limit"\} (\d+)/.exec(metrics);
      assert.ok(shed !== null && Number(shed[1]) > 0, "shed connections are counted");
    } finally {
      for (const c of clients) c.close();
      child.kill("SIGTERM");
      await child.status;
      await removeStore(`${ROOT}${store}`);
    }
  },
});

Deno.test({
  name:
    "epoll layer, the process: SIGHUP reloads with connections open, SIGTERM closes them and the process exits 0",
  ...opts,
  async fn() {
    await Deno.mkdir(`${ROOT}data`, { recursive: true });
    const store = `data/socket-layer-${crypto.randomUUID()}.db`;
    const gw = await spawnGateway(
      gatewayEnv(store, { IGGY_MQTT_LISTENERS_TCP_SOCKET_LAYER: "epoll" }),
      "gateway-epoll",
    );
    const clients: mqtt.MqttClient[] = [];
    try {
      const url = `mqtt://127.0.0.1:${gw.port}`;
      for (let i = 0; i < 20; i++) {
        clients.push(await mqtt.connectAsync(url, { clientId: `stop-${i}`, reconnectPeriod: 0 }));
      }
      const closed = clients.map((c) => new Promise<void>((r) => c.once("close", () => r())));
      gw.child.kill("SIGHUP");
      await waitFor(
        () => gw.output.join("").includes("Configuration reloaded"),
        10_000,
        "the reload's log line",
      );
      await clients[0].publishAsync("sensors/a/data", "after reload", { qos: 1 });
      const status = await gw.stop();
      assert.equal(status.code, 0);
      await Promise.all(closed);
    } finally {
      for (const c of clients) c.end(true);
      await gw.stop();
      await removeStore(`${ROOT}${store}`);
    }
  },
});
