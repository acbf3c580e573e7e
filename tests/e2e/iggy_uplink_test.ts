/**
 * Iggy mode: Iggy lost mid-run under QoS 1 load is one `Uplink down` and one `Uplink up` in the
 * log, however many connections and requests saw it, and `/status.json` carries the uplink as
 * fields. Against the fake Iggy (both dialects) always; against a real Iggy when
 * `IGGY_TEST_ADDRESS` is set (`IGGY_TEST_USERNAME` / `IGGY_TEST_PASSWORD`, default iggy/iggy),
 * through a proxy the test switches off and on; without it that test is ignored, loudly.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";
import { freePort, startGateway, type TestGateway, waitFor } from "../helpers/gateway.ts";

const REAL = Deno.env.get("IGGY_TEST_ADDRESS") ?? "";
if (REAL === "") {
  console.warn(
    "WARNING: IGGY_TEST_ADDRESS is not set; the Iggy-mode uplink test against a real Iggy is SKIPPED.",
  );
}

/** Something the test can take away and bring back on the same address. */
interface Outage {
  readonly address: string;
  down(): Promise<void>;
  up(): void;
  close(): Promise<void>;
}

/** A loopback TCP proxy to `target` that drops every connection and stops listening while down. */
function switchableProxy(target: string): Outage {
  const port = freePort();
  const [host, targetPort] = [target.replace(/:\d+$/, ""), Number(target.split(":").pop())];
  const conns = new Set<Deno.Conn>();
  let listener: Deno.Listener | undefined;
  const pipe = async (a: Deno.Conn, b: Deno.Conn) => {
    await a.readable.pipeTo(b.writable).catch(() => {});
    for (const c of [a, b]) {
      try {
        c.close();
      } catch { /* closed */ }
    }
  };
  const up = () => {
    const l = listener = Deno.listen({ hostname: "127.0.0.1", port });
    (async () => {
      for await (const client of l) {
        const server = await Deno.connect({ hostname: host, port: targetPort }).catch(() => null);
        if (!server) {
          client.close();
          continue;
        }
        conns.add(client).add(server);
        void pipe(client, server).finally(() => conns.delete(client));
        void pipe(server, client).finally(() => conns.delete(server));
      }
    })().catch(() => {});
  };
  const down = () => {
    listener?.close();
    listener = undefined;
    for (const c of conns) {
      try {
        c.close();
      } catch { /* closed */ }
    }
    conns.clear();
    return Promise.resolve();
  };
  up();
  return { address: `127.0.0.1:${port}`, down, up, close: down };
}

/** The fake Iggy, closed and started again on the same port. */
function fakeIggy(dialect: "0.11" | "0.12"): Outage {
  const port = freePort();
  const store = new FakeStore();
  let node = new FakeNode({ dialect, store });
  node.listen(port);
  return {
    address: `127.0.0.1:${port}`,
    down: () => node.close(),
    up: () => {
      node = new FakeNode({ dialect, store });
      node.listen(port);
    },
    close: () => node.close().catch(() => {}),
  };
}

/** QoS 1 publishers that keep publishing (a refused or unanswered publish is retried later). */
function qos1Load(gw: TestGateway, devices: number) {
  const state = { on: true, acked: 0 };
  const clients: mqtt.MqttClient[] = [];
  const runs = Array.from({ length: devices }, async (_, d) => {
    const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
      clientId: `uplink-dev-${d}`,
      reconnectPeriod: 50,
    });
    clients.push(c);
    // A refused publish waits 20 ms before the next, as a device backs off (real time).
    for (let n = 0; state.on; n++) {
      await c.publishAsync(`sensors/d${d}/data`, `${n}:${"x".repeat(1000)}`, { qos: 1 })
        .then(() => state.acked++, () => new Promise((r) => setTimeout(r, 20)));
    }
  });
  return {
    state,
    /** Ends the clients; a publish still in flight when its client ends never settles. */
    async stop() {
      state.on = false;
      await Promise.race([Promise.allSettled(runs), new Promise((r) => setTimeout(r, 200))]);
      for (const c of clients) await c.endAsync(true).catch(() => {});
    },
  };
}

async function uplinkOf(gw: TestGateway) {
  const res = await fetch(`http://127.0.0.1:${gw.httpPort}/status.json`);
  return (await res.json()).uplink;
}

async function outageTest(outage: Outage, env: Record<string, string>) {
  const gw = await startGateway({
    env: {
      IGGY_MQTT_GATEWAY_BACKEND: "iggy",
      IGGY_MQTT_IGGY_ADDRESS: outage.address,
      IGGY_MQTT_IGGY_RECONNECT_MAX_MS: "200",
      IGGY_MQTT_IGGY_REQUEST_TIMEOUT_MS: "1000",
      IGGY_MQTT_IGGY_HEARTBEAT_INTERVAL_MS: "500",
      ...env,
    },
  });
  const named = (msg: string) => gw.logs.map((l) => JSON.parse(l)).filter((l) => l.msg === msg);
  const load = qos1Load(gw, 3);
  try {
    await waitFor(() => load.state.acked >= 100, 10_000, "100 PUBACKs");
    assert.equal((await uplinkOf(gw)).up, true);
    await outage.down();
    await waitFor(async () => !(await uplinkOf(gw)).up, 10_000, "status.json: uplink down");
    const down = await uplinkOf(gw);
    assert.match(down.reason, /\S/);
    assert.equal(typeof down.since_ms, "number");
    assert.equal(typeof down.waiting_messages, "number");
    // Long enough for many requests, reconnects and heartbeats to fail.
    await new Promise((r) => setTimeout(r, 2_000));
    const acked = load.state.acked;
    outage.up();
    await waitFor(() => load.state.acked > acked + 50, 20_000, "PUBACKs again");
    await waitFor(() => named("Uplink up").length > 0, 10_000, "'Uplink up'");
    const up = await uplinkOf(gw);
    assert.equal(up.up, true);
    assert.ok(up.since_ms >= down.since_ms);
  } finally {
    await load.stop();
    await gw.stop();
    await outage.close();
  }
  assert.equal(named("Uplink down").length, 1, "one 'Uplink down'");
  assert.equal(named("Uplink up").length, 1, "one 'Uplink up'");
  assert.ok(named("Uplink up")[0].down_ms >= 2_000);
}

for (const dialect of ["0.11", "0.12"] as const) {
  Deno.test(`Iggy mode on fake Iggy ${dialect}: Iggy stopped mid-run under QoS 1 load: one down, one up`, async () => {
    await outageTest(fakeIggy(dialect), {
      IGGY_MQTT_IGGY_PROTOCOL: dialect,
      IGGY_MQTT_IGGY_PASSWORD: "iggy",
    });
  });
}

Deno.test("Iggy mode on fake Iggy 0.12 behind a proxy switched off and on: one down, one up", async () => {
  const node = new FakeNode({ dialect: "0.12", store: new FakeStore() });
  const proxy = switchableProxy(node.listen());
  try {
    await outageTest(proxy, { IGGY_MQTT_IGGY_PROTOCOL: "0.12", IGGY_MQTT_IGGY_PASSWORD: "iggy" });
  } finally {
    await node.close();
  }
});

Deno.test({
  name: "Iggy mode on a real Iggy: Iggy lost mid-run under QoS 1 load: one down, one up",
  ignore: REAL === "",
  fn: async () => {
    await outageTest(switchableProxy(REAL), {
      IGGY_MQTT_IGGY_USERNAME: Deno.env.get("IGGY_TEST_USERNAME") || "iggy",
      IGGY_MQTT_IGGY_PASSWORD: Deno.env.get("IGGY_TEST_PASSWORD") || "iggy",
    });
  },
});
