/**
 * The gateway in Iggy mode, end to end, against a real Iggy server (protocol 0.11.0 /
 * server 0.9.0) when `IGGY_TEST_ADDRESS` is set (`IGGY_TEST_USERNAME` / `IGGY_TEST_PASSWORD`,
 * default iggy/iggy; `IGGY_TEST_HTTP` for Iggy's own HTTP API, default the same host on port
 * 3000). Without it every test here is ignored, and a warning says so.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import type { IggyBackend } from "../../src/log/iggy/mod.ts";
import { iggyClient } from "../helpers/iggy_client.ts";
import { NO_GLOBAL_PERMISSIONS } from "../../src/access/permissions.ts";
import { partitionForKey } from "../../src/mapping/mod.ts";
import {
  connectPacket,
  HAS_MOSQUITTO_CLIENTS,
  publishPacket,
  RawClient,
  run,
  startGateway,
  waitFor,
} from "../helpers/gateway.ts";

const ADDRESS = Deno.env.get("IGGY_TEST_ADDRESS") ?? "";
const USER = Deno.env.get("IGGY_TEST_USERNAME") || "iggy";
const PASS = Deno.env.get("IGGY_TEST_PASSWORD") || "iggy";
const HTTP = Deno.env.get("IGGY_TEST_HTTP") ||
  `http://${ADDRESS.replace(/:\d+$/, "")}:3000`;
const ignore = ADDRESS === "";
if (ignore) {
  console.warn("WARNING: IGGY_TEST_ADDRESS is not set; the Iggy-mode gateway tests are SKIPPED.");
}
const opts = { ignore };
const SUFFIX = crypto.randomUUID().slice(0, 8);

/** The map used here: streams carry a per-run suffix so runs never collide. */
const MAP = `
default_stream = "mqtt_default_${SUFFIX}"
default_topic = "messages_default"
[[rule]]
mqtt_topic = 'building/(\\w+)/room/(\\d+)/.*'
stream = 'building_$1_${SUFFIX}'
topic = 'telemetry'
partition_key = 'room_$2'
`;

function iggyEnv(id: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    IGGY_MQTT_GATEWAY_BACKEND: "iggy",
    IGGY_MQTT_GATEWAY_ID: id,
    IGGY_MQTT_IGGY_ADDRESS: ADDRESS,
    IGGY_MQTT_IGGY_USERNAME: USER,
    IGGY_MQTT_IGGY_PASSWORD: PASS,
    IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "false",
    IGGY_MQTT_IGGY_RECONNECT_MAX_MS: "500",
    IGGY_MQTT_IGGY_REQUEST_TIMEOUT_MS: "3000",
    ...extra,
  };
}

function probeBackend(): IggyBackend {
  return iggyClient(ADDRESS, USER, PASS);
}

async function iggyHttp(path: string, init: RequestInit = {}): Promise<Response> {
  const login = await fetch(`${HTTP}/users/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ username: USER, password: PASS }),
  });
  const token = (await login.json()).access_token.token;
  return fetch(`${HTTP}${path}`, {
    ...init,
    headers: {
      "content-type": "application/json",
      authorization: `Bearer ${token}`,
      ...init.headers,
    },
  });
}

Deno.test({
  name:
    "iggy mode: mosquitto_pub -q 1 lands in the mapped stream/topic/partition with mqtt.* headers, in the partition Iggy picks for the same key",
  ...opts,
  ignore: ignore || !HAS_MOSQUITTO_CLIENTS,
  async fn() {
    const gw = await startGateway({
      env: iggyEnv("gw-pub", { IGGY_MQTT_LOG_AUTO_CREATE: "true" }),
      map: MAP,
    });
    const probe = probeBackend();
    await probe.open();
    try {
      const r = await run("mosquitto_pub", [
        "-h",
        "127.0.0.1",
        "-p",
        String(gw.port),
        "-u",
        USER,
        "-P",
        PASS,
        "-i",
        "iggy-dev-1",
        "-q",
        "1",
        "-t",
        "building/north/room/42/temp",
        "-m",
        "21.5",
      ]);
      assert.equal(r.code, 0, r.stderr);
      const stream = `building_north_${SUFFIX}`;
      const info = await probe.getTopic(stream, "telemetry");
      assert.ok(info, "auto-created topic");
      const ours = partitionForKey("room_42", info.partitions);
      const msgs = await probe.poll({ stream, topic: "telemetry", partition: ours }, 0, 10);
      assert.equal(msgs.length, 1);
      assert.equal(new TextDecoder().decode(msgs[0].payload), "21.5");
      assert.equal(msgs[0].headers.get("mqtt.topic"), "building/north/room/42/temp");
      assert.equal(msgs[0].headers.get("mqtt.client_id"), "iggy-dev-1");
      assert.equal(msgs[0].headers.get("mqtt.qos"), "1");
      // Iggy's own choice for the same messages key, through Iggy's HTTP API (its own tool).
      const send = await iggyHttp(`/streams/${stream}/topics/telemetry/messages`, {
        method: "POST",
        body: JSON.stringify({
          partitioning: { kind: "messages_key", value: btoa("room_42") },
          messages: [{ payload: btoa("from-iggy") }],
        }),
      });
      assert.ok(send.status === 201 || send.status === 202, `send ${send.status}`);
      await send.body?.cancel();
      const both = await probe.poll({ stream, topic: "telemetry", partition: ours }, 0, 10);
      assert.deepEqual(both.map((m) => new TextDecoder().decode(m.payload)), ["21.5", "from-iggy"]);
      // Readable by Iggy's own HTTP API, headers included.
      const polled = await iggyHttp(
        `/streams/${stream}/topics/telemetry/messages?consumer_id=1&partition_id=${ours}&kind=offset&value=0&count=10&auto_commit=false`,
      );
      const body = await polled.json();
      assert.equal(body.messages.length, 2);
      assert.equal(atob(body.messages[0].payload), "21.5");
    } finally {
      await probe.close();
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "iggy mode: wrong MQTT password gets CONNACK 4; a user without send rights gets no append and no PUBACK",
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: iggyEnv("gw-acl", { IGGY_MQTT_LOG_AUTO_CREATE: "true" }),
      map: MAP,
    });
    const reader = `reader_${SUFFIX}`;
    try {
      const bad = await RawClient.connect(gw.port);
      await bad.send(connectPacket("bad", { username: USER, password: "wrong" }));
      assert.deepEqual([...(await bad.readPacket(10_000))!], [0x20, 2, 0, 4]);
      bad.close();
      // A user that may only poll.
      const created = await iggyHttp("/users", {
        method: "POST",
        body: JSON.stringify({
          username: reader,
          password: "reader-pass",
          status: "active",
          permissions: {
            // Iggy's HTTP API takes the same flags as our permission model.
            global: { ...NO_GLOBAL_PERMISSIONS, poll_messages: true },
            streams: null,
          },
        }),
      });
      assert.ok(created.status < 300, `create user ${created.status}: ${await created.text()}`);
      const c = await RawClient.connect(gw.port);
      await c.send(connectPacket("reader-1", { username: reader, password: "reader-pass" }));
      assert.deepEqual([...(await c.readPacket(10_000))!], [0x20, 2, 0, 0]);
      await c.send(publishPacket("building/east/room/1/t", "nope", 1, 1));
      assert.ok(await c.closedByPeer(10_000), "closed without PUBACK");
      assert.equal(gw.view.metrics.publishes.get({ outcome: "denied" }), 1);
      const probe = probeBackend();
      await probe.open();
      assert.equal(await probe.getTopic(`building_east_${SUFFIX}`, "telemetry"), null);
      await probe.close();
    } finally {
      await iggyHttp(`/users/${reader}`, { method: "DELETE" }).then((r) => r.body?.cancel()).catch(
        () => {},
      );
      await gw.stop();
    }
  },
});

/** A loopback TCP proxy in front of Iggy, to cut and restore the backend. */
function proxy(target: string) {
  const [host, port] = [target.replace(/:\d+$/, ""), Number(target.split(":").pop())];
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const open = new Set<Deno.Conn>();
  let up = true;
  (async () => {
    for await (const c of listener) {
      if (!up) {
        c.close();
        continue;
      }
      open.add(c);
      Deno.connect({ hostname: host, port }).then((u) => {
        open.add(u);
        const pipe = (a: Deno.Conn, b: Deno.Conn) =>
          a.readable.pipeTo(b.writable).catch(() => {}).finally(() => {
            for (const x of [a, b]) {
              try {
                x.close();
              } catch { /* closed */ }
              open.delete(x);
            }
          });
        pipe(c, u);
        pipe(u, c);
      }, () => c.close());
    }
  })().catch(() => {});
  return {
    address: `127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    cut() {
      up = false;
      for (const c of open) {
        try {
          c.close();
        } catch { /* closed */ }
      }
      open.clear();
    },
    restore() {
      up = true;
    },
    close() {
      this.cut();
      listener.close();
    },
  };
}

Deno.test({
  name:
    "iggy mode: Iggy unreachable → /ready 503, no PUBACK, no crash; Iggy back → recovery without restart",
  ...opts,
  async fn() {
    const p = proxy(ADDRESS);
    const gw = await startGateway({
      env: iggyEnv("gw-outage", {
        IGGY_MQTT_IGGY_ADDRESS: p.address,
        IGGY_MQTT_LOG_AUTO_CREATE: "true",
        IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "true",
      }),
      map: MAP,
    });
    const ready = async () => {
      const r = await fetch(`http://127.0.0.1:${gw.httpPort}/ready`);
      await r.body?.cancel();
      return r.status;
    };
    try {
      await waitFor(async () => (await ready()) === 200, 10_000, "ready");
      p.cut();
      await waitFor(async () => (await ready()) === 503, 15_000, "503 while Iggy is unreachable");
      const c = await RawClient.connect(gw.port);
      await c.send(connectPacket("outage-dev"));
      assert.deepEqual([...(await c.readPacket(10_000))!], [0x20, 2, 0, 0]);
      await c.send(publishPacket("building/west/room/9/t", "while-down", 1, 1));
      const got = await c.readPacket(8_000);
      assert.ok(got === null || got[0] !== 0x40, "no PUBACK while Iggy is down");
      c.close();
      p.restore();
      await waitFor(async () => (await ready()) === 200, 20_000, "ready again");
      const d = await RawClient.connect(gw.port);
      await d.send(connectPacket("outage-dev"));
      assert.deepEqual([...(await d.readPacket(10_000))!], [0x20, 2, 0, 0]);
      await d.send(publishPacket("building/west/room/9/t", "after", 1, 2));
      assert.deepEqual([...(await d.readPacket(15_000))!], [0x40, 2, 0, 2]);
      d.close();
    } finally {
      await gw.stop();
      p.close();
    }
  },
});

Deno.test({
  name:
    "iggy mode scale-out: a subscriber on gateway A receives, with the exact topic, what a device publishes through gateway B; each commits offsets under its own consumer",
  ...opts,
  async fn() {
    const env = {
      IGGY_MQTT_LOG_AUTO_CREATE: "true",
      IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "true",
      IGGY_MQTT_LIMITS_COMMIT_INTERVAL_MS: "50",
    };
    const a = await startGateway({ env: iggyEnv("gw-a", env), map: MAP });
    const b = await startGateway({ env: iggyEnv("gw-b", env), map: MAP });
    const topic = "building/south/room/7/humidity";
    const subA = await mqtt.connectAsync(`mqtt://127.0.0.1:${a.port}`, {
      clientId: "sub-a",
      reconnectPeriod: 0,
    });
    const subB = await mqtt.connectAsync(`mqtt://127.0.0.1:${b.port}`, {
      clientId: "sub-b",
      reconnectPeriod: 0,
    });
    const pub = await mqtt.connectAsync(`mqtt://127.0.0.1:${b.port}`, {
      clientId: "pub-b",
      reconnectPeriod: 0,
    });
    try {
      const gotA: string[] = [];
      const gotB: string[] = [];
      subA.on("message", (t, m) => gotA.push(`${t}=${m}`));
      subB.on("message", (t, m) => gotB.push(`${t}=${m}`));
      // The target must exist before subscribing (subscribe creates it too with auto_create).
      await subA.subscribeAsync(topic, { qos: 1 });
      await subB.subscribeAsync(topic, { qos: 1 });
      for (let i = 0; i < 5; i++) await pub.publishAsync(topic, `h${i}`, { qos: 1 });
      const want = [0, 1, 2, 3, 4].map((i) => `${topic}=h${i}`);
      await waitFor(() => gotA.length >= 5 && gotB.length >= 5, 15_000, "both subscribers");
      assert.deepEqual(gotA, want);
      assert.deepEqual(gotB, want);
      // Each gateway stores its own consumer offset for the triple.
      const probe = probeBackend();
      await probe.open();
      const stream = `building_south_${SUFFIX}`;
      const info = (await probe.getTopic(stream, "telemetry"))!;
      const triple = {
        stream,
        topic: "telemetry",
        partition: partitionForKey("room_7", info.partitions),
      };
      await waitFor(
        async () =>
          (await probe.getOffset("mqtt-gateway-gw-a", triple)) === 4 &&
          (await probe.getOffset("mqtt-gateway-gw-b", triple)) === 4,
        10_000,
        "both consumer offsets at 4",
      );
      await probe.close();
    } finally {
      await Promise.all([subA.endAsync(), subB.endAsync(), pub.endAsync()]);
      await a.stop();
      await b.stop();
    }
  },
});

Deno.test({
  name:
    "iggy mode: durability — auto-created topics confirm on disk, a server-default topic is named by check and /ready",
  ...opts,
  async fn() {
    const probe = probeBackend();
    await probe.open();
    const stream = `durability_${SUFFIX}`;
    try {
      // Made elsewhere with the server's defaults: acknowledges before its disk.
      await probe.createTopic(stream, "loose", { partitions: 1 });
      const root = new URL("../../", import.meta.url).pathname;
      const dir = `${root}data/durability-${SUFFIX}`;
      await Deno.mkdir(dir, { recursive: true });
      const mapFile = `data/durability-${SUFFIX}/map.toml`;
      await Deno.writeTextFile(
        `${root}${mapFile}`,
        `default_stream = "${stream}"\ndefault_topic = "loose"\n[[rule]]\nmqtt_topic = 'tight/.*'\nstream = '${stream}'\ntopic = 'tight'\n`,
      );
      try {
        const r = await run(Deno.execPath(), ["run", "-P=gateway", "main.ts", "check"], {
          cwd: root,
          env: { ...iggyEnv("durability-check"), IGGY_MQTT_MAPPING_MAP_FILE: mapFile },
        });
        assert.equal(r.code, 0, r.stderr);
        assert.match(r.stdout, new RegExp(`WARNING ${stream}/loose: acknowledges sends before`));
        assert.match(r.stdout, new RegExp(`${stream}/tight: missing`));
      } finally {
        await Deno.remove(dir, { recursive: true }).catch(() => {});
      }
      const gw = await startGateway({
        map:
          `default_stream = "${stream}"\ndefault_topic = "loose"\n[[rule]]\nmqtt_topic = 'tight/.*'\nstream = '${stream}'\ntopic = 'tight'\n`,
        env: { ...iggyEnv("durability-gw"), IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "true" },
      });
      try {
        assert.deepEqual(gw.view.readiness().warnings.length, 1);
        assert.match(gw.view.readiness().warnings[0], new RegExp(`${stream}/loose`));
        const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, { reconnectPeriod: 0 });
        await c.publishAsync("tight/1", "x", { qos: 1 });
        await c.endAsync();
        const tight = await probe.getTopic(stream, "tight");
        assert.ok(tight && !tight.acksBeforeDisk, "the auto-created topic enforces fsync");
        assert.equal(gw.view.readiness().warnings[0].includes("tight"), false);
      } finally {
        await gw.stop();
      }
    } finally {
      await probe.close();
    }
  },
});

Deno.test({
  name:
    "iggy mode: an MQTT 5 PUBACK's coordinates (iggy.stream/topic/partition/offset) point at the message in Iggy, user properties stored as headers",
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: iggyEnv("gw-v5", { IGGY_MQTT_LOG_AUTO_CREATE: "true" }),
      map: MAP,
    });
    const probe = probeBackend();
    await probe.open();
    try {
      const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        protocolVersion: 5,
        username: USER,
        password: PASS,
        reconnectPeriod: 0,
        properties: { userProperties: { "iggy-coordinates": "1" } }, // asks for them
      });
      // deno-lint-ignore no-explicit-any
      const pubacks: any[] = [];
      c.on("packetreceive", (p) => p.cmd === "puback" && pubacks.push(p));
      for (const v of ["first", "second", "third"]) {
        await c.publishAsync("building/east/room/7/t", v, {
          qos: 1,
          properties: { userProperties: { n: v } },
        });
      }
      await waitFor(() => pubacks.length === 3, 10_000, "PUBACKs");
      for (const [i, v] of ["first", "second", "third"].entries()) {
        const u = pubacks[i].properties.userProperties;
        assert.equal(u["iggy.stream"], `building_east_${SUFFIX}`);
        assert.equal(u["iggy.topic"], "telemetry");
        const at = {
          stream: u["iggy.stream"],
          topic: u["iggy.topic"],
          partition: Number(u["iggy.partition"]),
        };
        const [m] = await probe.poll(at, Number(u["iggy.offset"]), 1);
        assert.equal(m.offset, Number(u["iggy.offset"]));
        assert.equal(new TextDecoder().decode(m.payload), v);
        assert.equal(m.headers.get("mqtt5.user.0.n"), v);
      }
      await c.endAsync();
    } finally {
      await probe.close();
      await gw.stop();
    }
  },
});
