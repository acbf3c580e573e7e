/**
 * Restart: a new subscription starts at the end of the log, whether or not the gateway just
 * started (a device subscribed to a command topic must not run old commands again after an
 * upgrade); only a stored session resuming gets what was published while it was away, and what
 * it had not acknowledged when the gateway stopped (its own positions, not the gateway's).
 * Both stops an operator sees: SIGTERM (systemd) and SIGKILL (a crash), on the gateway process,
 * on the embedded log and, with `IGGY_TEST_ADDRESS` (a real Iggy, root `iggy`/`iggy` unless
 * `IGGY_TEST_USERNAME`/`IGGY_TEST_PASSWORD` say otherwise), in Iggy mode.
 */
import assert from "node:assert/strict";
import { connectPacket, RawClient } from "../helpers/gateway.ts";
import { type GatewayProcess, spawnGateway } from "../helpers/process.ts";
import { removeStore } from "../helpers/store.ts";
import { opts, publishAll, publishesBefore, receive, subscribe } from "./_subscribe_helpers.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const IGGY = Deno.env.get("IGGY_TEST_ADDRESS") ?? "";
if (IGGY === "") {
  console.warn("WARNING: IGGY_TEST_ADDRESS is not set; the Iggy-mode restart tests are SKIPPED.");
}
const FILTER = "sensors/+/data";
const OLD = 50;

/** CONNECT with clean session 0 or 1; returns the client and CONNACK's session present flag. */
async function connect(
  port: number,
  id: string,
  clean: boolean,
): Promise<{ c: RawClient; present: boolean }> {
  const c = await RawClient.connect(port);
  await c.send(connectPacket(id, { clean }));
  const ack = await c.readPacket();
  assert.ok(ack !== null && ack[0] === 0x20 && ack[3] === 0, `CONNACK 0 for ${id}`);
  return { c, present: ack[2] === 1 };
}

/** DISCONNECT, so a stored session ends without a will and keeps its record. */
async function disconnect(c: RawClient): Promise<void> {
  await c.send([0xe0, 0x00]);
  c.close();
}

async function stopWith(gw: GatewayProcess, signal: "SIGTERM" | "SIGKILL"): Promise<void> {
  if (signal === "SIGTERM") {
    const status = await gw.stop();
    assert.equal(status.code, 0, `SIGTERM exit: ${gw.output.join("").slice(-2000)}`);
    return;
  }
  gw.child.kill("SIGKILL");
  await gw.child.status;
}

/**
 * A backend for one test: the environment of its gateway processes and the client ids and
 * topic prefix to use (in Iggy mode unique per run, as the streams and sessions outlive it).
 */
interface Backend {
  readonly env: Record<string, string>;
  readonly id: (name: string) => string;
  readonly remove: () => Promise<void>;
}

async function embedded(): Promise<Backend> {
  await Deno.mkdir(`${ROOT}data`, { recursive: true });
  const db = `data/restart-${crypto.randomUUID()}.db`;
  return {
    env: { IGGY_MQTT_EMBEDDED_PATH: db },
    id: (n) => n,
    remove: () => removeStore(`${ROOT}${db}`),
  };
}

/** Iggy mode: a map of this run's own stream (in ./config, which the permission set reads). */
async function iggy(): Promise<Backend> {
  const run = crypto.randomUUID().slice(0, 8);
  const map = await Deno.makeTempFile({
    dir: `${ROOT}config`,
    prefix: ".test-map-",
    suffix: ".toml",
  });
  await Deno.writeTextFile(
    map,
    `default_stream = "restart_${run}"\ndefault_topic = "other"\n[[rule]]\nmqtt_topic = 'sensors/([^/]+)/data'\nstream = 'restart_${run}'\ntopic = 'data'\npartition_key = 'sensor_$1'\n`,
  );
  return {
    env: {
      IGGY_MQTT_GATEWAY_BACKEND: "iggy",
      IGGY_MQTT_GATEWAY_ID: `restart-${run}`,
      IGGY_MQTT_IGGY_ADDRESS: IGGY,
      IGGY_MQTT_IGGY_USERNAME: Deno.env.get("IGGY_TEST_USERNAME") || "iggy",
      IGGY_MQTT_IGGY_PASSWORD: Deno.env.get("IGGY_TEST_PASSWORD") || "iggy",
      IGGY_MQTT_MAPPING_MAP_FILE: map,
    },
    id: (n) => `${n}-${run}`,
    remove: () => Deno.remove(map),
  };
}

const BACKENDS = [["embedded", embedded, false], ["iggy", iggy, IGGY === ""]] as const;

for (const [kind, backendOf, ignore] of BACKENDS) {
  for (const signal of ["SIGTERM", "SIGKILL"] as const) {
    Deno.test({
      name:
        `restart (${kind}) after ${signal}: a new clean subscriber to ${FILTER} gets none of the ${OLD} messages appended before, then every new one; a stored session gets all ${OLD}`,
      ...opts,
      ignore,
      async fn() {
        const backend = await backendOf();
        const id = backend.id;
        const env = {
          ...backend.env,
          IGGY_MQTT_GATEWAY_LOG_LEVEL: "info",
          IGGY_MQTT_LIMITS_COMMIT_INTERVAL_MS: "10",
        };
        const open: RawClient[] = [];
        let gw = await spawnGateway(env);
        try {
          // The gateway's consumer offset on the partition is stored once (a subscriber settled
          // "first"), so it lies behind what is published later while nobody subscribes.
          const first = await connect(gw.port, id("first"), true);
          open.push(first.c);
          assert.deepEqual(await subscribe(first.c, [[FILTER, 1]]), [1]);
          const pub = await connect(gw.port, id("pub"), true);
          open.push(pub.c);
          await publishAll(pub.c, [["sensors/e/data", "first"]]);
          assert.deepEqual((await receive(first.c, 1)).map((r) => r.payload), ["first"]);
          await publishesBefore(first.c); // its PUBACK handled
          for (const c of open.splice(0)) c.close();
          await stopWith(gw, "SIGTERM"); // the final commit stores the settled offset
          gw = await spawnGateway(env);

          // A stored session subscribes, then leaves; its subscription keeps a position.
          const s1 = await connect(gw.port, id("s1"), false);
          assert.deepEqual(await subscribe(s1.c, [[FILTER, 1]]), [1]);
          await disconnect(s1.c);
          const pub1 = await connect(gw.port, id("pub"), true);
          open.push(pub1.c);
          const old = Array.from({ length: OLD }, (_, i) => `old-${i}`);
          await publishAll(pub1.c, old.map((p): [string, string] => ["sensors/e/data", p]));
          for (const c of open.splice(0)) c.close();

          await stopWith(gw, signal);
          gw = await spawnGateway(env);

          const fresh = await connect(gw.port, id("fresh"), true);
          open.push(fresh.c);
          assert.deepEqual(await subscribe(fresh.c, [[FILTER, 1]]), [1]);
          // Old messages would come first: the reader reads the partition in offset order.
          const pub2 = await connect(gw.port, id("pub2"), true);
          open.push(pub2.c);
          const next = Array.from({ length: 5 }, (_, i) => `new-${i}`);
          await publishAll(pub2.c, next.map((p): [string, string] => ["sensors/e/data", p]));
          assert.deepEqual((await receive(fresh.c, 5)).map((r) => r.payload), next);
          assert.deepEqual(await publishesBefore(fresh.c), [], "nothing older, nothing more");

          // A wildcard reaching a partition no reader has read since the restart: nothing old.
          const other = await connect(gw.port, id("other"), true);
          open.push(other.c);
          assert.deepEqual(await subscribe(other.c, [["sensors/#", 0]]), [0]);
          assert.deepEqual(await publishesBefore(other.c), []);

          // The stored session comes back to everything published while it was away.
          const back = await connect(gw.port, id("s1"), false);
          open.push(back.c);
          assert.equal(back.present, true, "session present after the restart");
          const got = (await receive(back.c, OLD + next.length)).map((r) => r.payload);
          assert.deepEqual(got, [...old, ...next]);
        } finally {
          for (const c of open) c.close();
          await gw.stop();
          await backend.remove();
        }
      },
    });
  }

  Deno.test({
    name:
      `restart (${kind}): a stored session holding unacknowledged QoS 1 copies when the gateway stops gets them again on its return, a new clean subscriber does not`,
    ...opts,
    ignore,
    async fn() {
      const backend = await backendOf();
      const id = backend.id;
      const env = { ...backend.env, IGGY_MQTT_LIMITS_COMMIT_INTERVAL_MS: "10" };
      const open: RawClient[] = [];
      let gw = await spawnGateway(env);
      try {
        const holder = await connect(gw.port, id("holder"), false);
        open.push(holder.c);
        assert.deepEqual(await subscribe(holder.c, [[FILTER, 1]]), [1]);
        const pub = await connect(gw.port, id("pub"), true);
        open.push(pub.c);
        await publishAll(pub.c, [["sensors/h/data", "a-0"], ["sensors/h/data", "a-1"]]);
        assert.equal((await receive(holder.c, 2)).length, 2); // acknowledged
        await publishAll(pub.c, [["sensors/h/data", "u-0"], ["sensors/h/data", "u-1"]], 10);
        const held = await receive(holder.c, 2, { ack: false });
        assert.deepEqual(held.map((r) => r.payload), ["u-0", "u-1"]);
        // The gateway stops while the holder is connected with u-0 and u-1 unacknowledged.
        await gw.stop();
        for (const c of open.splice(0)) c.close();
        gw = await spawnGateway(env);

        const fresh = await connect(gw.port, id("fresh"), true);
        open.push(fresh.c);
        assert.deepEqual(await subscribe(fresh.c, [[FILTER, 1]]), [1]);
        const back = await connect(gw.port, id("holder"), false);
        open.push(back.c);
        assert.equal(back.present, true);
        const again = await receive(back.c, 2);
        assert.deepEqual(again.map((r) => [r.payload, r.qos]), [["u-0", 1], ["u-1", 1]]);
        assert.deepEqual(await publishesBefore(back.c), [], "acknowledged ones do not come again");
        assert.deepEqual(
          await publishesBefore(fresh.c),
          [],
          "the fresh subscriber gets nothing old",
        );
      } finally {
        for (const c of open) c.close();
        await gw.stop();
        await backend.remove();
      }
    },
  });
}
