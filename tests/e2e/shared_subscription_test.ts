/**
 * Shared subscriptions `$share/<group>/<filter>` inside one gateway (issue 39, embedded log):
 * each matching message goes to one member of the group; the members split the work; a member
 * that goes away with unacknowledged QoS 1 copies has them delivered to the other members; a
 * malformed share name is refused; No Local on a shared subscription is a protocol error.
 * Real clients: MQTT.js (3.1.1 and 5) and raw sockets.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import {
  connectPacket,
  RawClient,
  startGateway,
  type TestGateway,
  waitFor,
} from "../helpers/gateway.ts";
import {
  mqttjsPing,
  opts,
  publishesBefore,
  rawSubscriber,
  receive,
  subscribe,
} from "./_subscribe_helpers.ts";
import { cli } from "../helpers/cli.ts";

const SHARE = "$share/workers/jobs/+";

/** An MQTT.js member that records the payloads it receives. */
async function member(gw: TestGateway, v5 = false) {
  const got: string[] = [];
  const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
    reconnectPeriod: 0,
    protocolVersion: v5 ? 5 : 4,
  });
  c.on("message", (_t, p) => got.push(new TextDecoder().decode(p)));
  await c.subscribeAsync(SHARE, { qos: 1 });
  return { c, got };
}

async function publishMany(gw: TestGateway, n: number, prefix = "m"): Promise<string[]> {
  const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, { reconnectPeriod: 0 });
  const sent: string[] = [];
  for (let i = 0; i < n; i += 100) {
    const batch = [];
    for (let j = i; j < Math.min(n, i + 100); j++) {
      sent.push(`${prefix}${j}`);
      batch.push(c.publishAsync(`jobs/${j % 7}`, `${prefix}${j}`, { qos: 1 }));
    }
    await Promise.all(batch);
  }
  await c.endAsync();
  return sent;
}

Deno.test({
  name:
    "shared subscription: three members split 3,000 QoS 1 messages, each 20-46%, all delivered, none twice; a plain subscriber still gets all",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const members = [await member(gw), await member(gw, true), await member(gw)];
      const plain: string[] = [];
      const p = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, { reconnectPeriod: 0 });
      p.on("message", (_t, b) => plain.push(new TextDecoder().decode(b)));
      await p.subscribeAsync("jobs/+", { qos: 1 });
      const sent = await publishMany(gw, 3000);
      const total = () => members.reduce((n, m) => n + m.got.length, 0);
      await waitFor(() => total() >= 3000 && plain.length >= 3000, 15_000, "all delivered");
      // Barrier for "none twice": nothing left in flight at the gateway, then a PINGRESP on
      // every client, so any copy it wrote before has been read.
      await waitFor(() => gw.view.settled(), 5000, "every copy acknowledged");
      for (const c of [...members.map((m) => m.c), p]) await mqttjsPing(c);
      const all = members.flatMap((m) => m.got);
      assert.equal(all.length, 3000, "no message twice");
      assert.deepEqual(new Set(all), new Set(sent));
      for (const m of members) {
        assert.ok(m.got.length >= 600 && m.got.length <= 1380, `share ${m.got.length} of 3000`);
      }
      assert.equal(plain.length, 3000);
      for (const m of members) await m.c.endAsync();
      await p.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "shared subscription: a member that goes away with unacknowledged QoS 1 copies has them delivered to the other members",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_LIMITS_MAX_INFLIGHT_PER_CLIENT: "8" } });
    try {
      const good = [await member(gw), await member(gw)];
      const silent = await rawSubscriber(gw.port, "silent", [[SHARE, 1]]);
      const sent = await publishMany(gw, 300);
      // The silent member holds its window (8) unacknowledged and is passed over after that.
      const held = await receive(silent, 8, { ack: false });
      assert.equal(held.length, 8);
      silent.close();
      const all = () => good.flatMap((m) => m.got);
      await waitFor(() => new Set(all()).size === 300, 10_000, "every message reached a member");
      assert.deepEqual(new Set(all()), new Set(sent));
      for (const m of good) await m.c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "shared subscription: a $share filter without a name or a filter gets SUBACK 0x8F (MQTT 5) / 0x80 (3.1.1); No Local on one is DISCONNECT 0x82",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const v5 = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        reconnectPeriod: 0,
        protocolVersion: 5,
      });
      const subacks: number[][] = [];
      v5.on("packetreceive", (p) => {
        if (p.cmd === "suback") subacks.push(p.granted as number[]);
      });
      const code = async (filter: string, c: mqtt.MqttClient) => {
        const before = subacks.length;
        await c.subscribeAsync(filter, { qos: 1 }).catch(() => {});
        await waitFor(() => subacks.length > before, 3000, "SUBACK");
        return subacks[before][0];
      };
      assert.equal(await code("$share/onlyname", v5), 0x8f); // no filter after the name
      assert.equal(await code("$share//x", v5), 0x8f); // an empty name
      const v3 = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, { reconnectPeriod: 0 });
      const granted = await v3.subscribeAsync("$share/onlyname", { qos: 1 }).catch(() => [{
        qos: 128,
      }]);
      assert.equal(granted[0].qos, 128);
      await v3.endAsync();
      const closed = new Promise<number | undefined>((resolve) => {
        v5.on("disconnect", (p) => resolve(p.reasonCode));
      });
      v5.subscribe("$share/g/x", { qos: 1, nl: true });
      assert.equal(await closed, 0x82);
      v5.end(true);
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "shared subscription: a group whose last member left with a stored session keeps its position; the member back gets everything published meanwhile",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const clean = await member(gw);
      const stored = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        reconnectPeriod: 0,
        clientId: "worker-1",
        clean: false,
      });
      await stored.subscribeAsync(SHARE, { qos: 1 });
      await clean.c.endAsync();
      await stored.endAsync(); // the last member: its session is stored, the group parked
      const sent = await publishMany(gw, 50);
      const got: string[] = [];
      // The handler is there before the CONNACK: the backlog follows it at once.
      const back = mqtt.connect(`mqtt://127.0.0.1:${gw.port}`, {
        reconnectPeriod: 0,
        clientId: "worker-1",
        clean: false,
      });
      back.on("message", (_t, p) => got.push(new TextDecoder().decode(p)));
      await waitFor(() => got.length >= 50, 10_000, "the group's backlog");
      assert.deepEqual(new Set(got), new Set(sent));
      await back.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "shared subscription bounds: a group beyond limits.max_share_groups and a member beyond limits.max_share_members get SUBACK 0x97; /metrics counts the groups",
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: { IGGY_MQTT_LIMITS_MAX_SHARE_GROUPS: "1", IGGY_MQTT_LIMITS_MAX_SHARE_MEMBERS: "2" },
    });
    try {
      const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        reconnectPeriod: 0,
        protocolVersion: 5,
      });
      const subacks: number[][] = [];
      c.on("packetreceive", (p) => {
        if (p.cmd === "suback") subacks.push(p.granted as number[]);
      });
      await c.subscribeAsync({ "$share/a/x": { qos: 1 }, "$share/b/x": { qos: 1 } }).catch(
        () => {},
      );
      await waitFor(() => subacks.length === 1, 3000, "SUBACK");
      assert.deepEqual(subacks[0], [1, 0x97]); // a second group: over max_share_groups
      const m2 = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, { reconnectPeriod: 0 });
      assert.equal((await m2.subscribeAsync("$share/a/x", { qos: 1 }))[0].qos, 1); // member 2
      const m3 = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        reconnectPeriod: 0,
        protocolVersion: 5,
      });
      const third = await m3.subscribeAsync("$share/a/x", { qos: 1 }).then(
        (g) => g[0].qos,
        () => 0x97,
      );
      assert.equal(third, 0x97); // member 3 of a group of at most 2
      const metrics = await (await fetch(`http://127.0.0.1:${gw.httpPort}/metrics`)).text();
      assert.match(metrics, /^mqtt_share_groups\{state="connected"\} 1$/m);
      for (const x of [c, m2, m3]) await x.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test("explain reads a $share/<group>/ filter's topic and names the group", async () => {
  const r = await cli(["explain", "--map", "config/topic-map.toml", "$share/w/sensors/s1/data"]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /share group "w": stream "sensors", topic "sensor_data", key "sensor_s1"/);
});

Deno.test({
  name:
    "shared subscription lag: copies a member holds unacknowledged show in mqtt_share_group_lag_messages and on /status.json, and go once the member they move to acknowledges them",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      // A raw member that reads but never sends a PUBACK: what it gets stays unsettled.
      const silent = await rawSubscriber(gw.port, "silent", [[SHARE, 1]]);
      await publishMany(gw, 5);
      const lag = async () => {
        const text = await (await fetch(`http://127.0.0.1:${gw.httpPort}/metrics`)).text();
        const m = text.match(/^mqtt_share_group_lag_messages\{group="workers\/jobs\/\+"\} (\d+)$/m);
        return m === null ? -1 : Number(m[1]);
      };
      let seen = -1;
      await waitFor(async () => (seen = await lag()) === 5, 5000, "a lag of 5").catch(() => {
        throw new Error(`lag ${seen}`);
      });
      const status = await (await fetch(`http://127.0.0.1:${gw.httpPort}/status.json`)).json();
      assert.deepEqual(status.share_groups.groups, [
        { group: "workers/jobs/+", members: 1, lag: 5, partitions: null },
      ]);
      assert.equal(status.share_groups.members, 1);
      const next = await member(gw);
      silent.close(); // its copies go to the other member, which acknowledges them
      await waitFor(() => next.got.length >= 5, 5000, "the silent member's copies");
      await waitFor(async () => (seen = await lag()) === 0, 5000, "no lag").catch(() => {
        throw new Error(`lag ${seen}`);
      });
      await next.c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "shared subscription: after a gateway restart, the parked group's member back (its stored session's positions) gets what was published before and after the restart, not what it had",
  ...opts,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "iggy-mqtt-share-restart-" });
    const env = { IGGY_MQTT_EMBEDDED_PATH: `${dir}/gateway.db`, IGGY_MQTT_GATEWAY_ID: "share-gw" };
    const options = { reconnectPeriod: 0, clientId: "worker-r", clean: false };
    const want: string[] = [];
    try {
      const gw1 = await startGateway({ env });
      try {
        const stored = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw1.port}`, options);
        const early: string[] = [];
        stored.on("message", (_t, p) => early.push(new TextDecoder().decode(p)));
        await stored.subscribeAsync(SHARE, { qos: 1 });
        await publishMany(gw1, 5, "a"); // delivered and acknowledged: not again
        await waitFor(() => early.length === 5, 5000, "the first 5");
        await stored.endAsync(); // the last member, its session stored: the group is parked
        want.push(...await publishMany(gw1, 20, "b"));
      } finally {
        await gw1.stop();
      }
      const gw2 = await startGateway({ env });
      try {
        want.push(...await publishMany(gw2, 10, "c"));
        const got: string[] = [];
        const back = mqtt.connect(`mqtt://127.0.0.1:${gw2.port}`, options);
        back.on("message", (_t, p) => got.push(new TextDecoder().decode(p)));
        await waitFor(() => new Set(got).size >= 30, 10_000, "20 before the restart, 10 after")
          .catch(() => {});
        // Barrier for "nothing else": nothing in flight at the gateway, then a PINGRESP.
        await waitFor(() => gw2.view.settled(), 5000, "every copy acknowledged");
        await mqttjsPing(back);
        await back.endAsync();
        assert.deepEqual([...new Set(got)].sort(), want.sort());
      } finally {
        await gw2.stop();
      }
    } finally {
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name:
    "shared subscription: after a gateway restart, what a stored-session member had not acknowledged comes again to the group, whichever member comes back first",
  ...opts,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "iggy-mqtt-share-held-" });
    const env = {
      IGGY_MQTT_EMBEDDED_PATH: `${dir}/gateway.db`,
      IGGY_MQTT_GATEWAY_ID: "share-held",
    };
    const stored = (id: string) => ({ reconnectPeriod: 0, clientId: id, clean: false });
    const held: string[] = [];
    try {
      const gw1 = await startGateway({ env });
      try {
        // a acknowledges what it gets (MQTT.js); b never does (a raw client), so b's copies
        // are in flight when the gateway stops.
        const a = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw1.port}`, stored("worker-a"));
        await a.subscribeAsync(SHARE, { qos: 1 });
        const b = await RawClient.connect(gw1.port);
        await b.send(connectPacket("worker-b", { clean: false }));
        assert.equal((await b.readPacket())?.[0], 0x20);
        assert.deepEqual(await subscribe(b, [[SHARE, 1]]), [1]);
        const sent = await publishMany(gw1, 20, "h");
        const got = await receive(b, 1, { ack: false }); // the group dealt b some of them
        held.push(...got.map((r) => r.payload));
        held.push(...(await publishesBefore(b)).map((r) => r.payload));
        assert.ok(held.length > 0 && held.length < sent.length, `b holds ${held.length}`);
        await a.endAsync();
        b.close();
      } finally {
        await gw1.stop();
      }
      const gw2 = await startGateway({ env });
      try {
        // a comes back first (its own position is past everything it acknowledged).
        const got: string[] = [];
        const back = mqtt.connect(`mqtt://127.0.0.1:${gw2.port}`, stored("worker-a"));
        back.on("message", (_t, p) => got.push(new TextDecoder().decode(p)));
        await waitFor(() => held.every((h) => got.includes(h)), 10_000, "b's held copies")
          .catch((e) => {
            throw new Error(`${e.message}: held ${held}, got ${got}`);
          });
        await back.endAsync();
      } finally {
        await gw2.stop();
      }
    } finally {
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});
