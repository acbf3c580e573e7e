/**
 * The wall clock jumps while the gateway runs, as on an edge box without a battery-backed
 * clock when NTP first answers: the gateway process runs under libfaketime (Debian package
 * `faketime`), its wall clock read from a file the test rewrites, its monotonic clock real
 * (`FAKETIME_DONT_FAKE_MONOTONIC=1`, as a real step leaves it). Real clients: Mosquitto's
 * `mosquitto_pub` / `mosquitto_sub` and MQTT.js.
 *
 * Forward 20 days: 1,000 PUBACKed messages all stay (also after a restart), a stored session
 * comes back present with its 10 messages, one warn line names the jump; forward mode with the
 * uplink down keeps `forward_lag_seconds` at the real age. Backward 20 days: nothing is
 * deleted, the order is kept, and `$replay/time:` at the clock's reading between the two phases
 * replays the second phase after the first (stamped later than the asked time, see OPERATIONS).
 * No clock ledger (a store from a version without one): a restart judges the store's newest
 * message instead, warns when it lies 20 days ahead, and does not count 20 days behind.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { freePort, HAS_MOSQUITTO_CLIENTS, waitFor } from "../helpers/gateway.ts";
import { type GatewayProcess, spawnGateway } from "../helpers/process.ts";
import { removeStore } from "../helpers/store.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const LIBFAKETIME = [
  "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
  "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
  "/usr/lib/faketime/libfaketime.so.1",
].find((p) => {
  try {
    return Deno.statSync(p).isFile;
  } catch {
    return false;
  }
});
if (LIBFAKETIME === undefined) {
  console.warn(
    "WARNING: libfaketime not found; the wall-clock jump tests are SKIPPED " +
      "(install Debian package faketime).",
  );
}
const SKIP = LIBFAKETIME === undefined || !HAS_MOSQUITTO_CLIENTS;

const DAY_MS = 86_400_000;
const RETENTION_INTERVAL_MS = 2_000;
const JUMP_LINE = "Wall clock jumped";

/** The gateway's wall clock: an offset from real time in a file libfaketime reads. */
class FakeClock {
  readonly file: string;
  constructor(dir: string) {
    this.file = `${dir}/faketime`;
  }
  /** `offset` as libfaketime reads it: "-20d", "+0". Written whole (rename): never read half. */
  async set(offset: string): Promise<void> {
    await Deno.writeTextFile(`${this.file}.tmp`, `${offset}\n`);
    await Deno.rename(`${this.file}.tmp`, this.file);
  }
  env(): Record<string, string> {
    return {
      LD_PRELOAD: LIBFAKETIME!,
      FAKETIME_TIMESTAMP_FILE: this.file,
      // Read again at most once a second: the step is seen within a second, and a read of the
      // file per clock call would slow every timer of the runtime.
      FAKETIME_CACHE_DURATION: "1",
      FAKETIME_DONT_FAKE_MONOTONIC: "1",
    };
  }
}

/** A store and a fake clock in a test's own place; removed by `remove`. */
async function setUp(startOffset: string) {
  await Deno.mkdir(`${ROOT}data`, { recursive: true });
  const db = `data/clock-${crypto.randomUUID()}.db`;
  const dir = await Deno.makeTempDir({ prefix: "clock-jump-" });
  const clock = new FakeClock(dir);
  await clock.set(startOffset);
  const env = {
    ...clock.env(),
    IGGY_MQTT_EMBEDDED_PATH: db,
    IGGY_MQTT_LOG_RETENTION_INTERVAL_MS: String(RETENTION_INTERVAL_MS),
    IGGY_MQTT_GATEWAY_DRAIN_TIMEOUT_MS: "1000",
  };
  return {
    clock,
    env,
    async remove() {
      await removeStore(`${ROOT}${db}`);
      await Deno.remove(dir, { recursive: true });
    },
  };
}

async function run(cmd: string, args: string[], stdin?: string): Promise<string> {
  const child = new Deno.Command(cmd, {
    args,
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(stdin));
    await w.close();
  }
  const out = await child.output();
  const text = new TextDecoder().decode(out.stdout);
  assert.equal(out.code, 0, `${cmd} ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
  return text;
}

/** Publishes each line of `payloads` at QoS 1; mosquitto_pub exits once all are PUBACKed. */
async function publish(port: number, topic: string, payloads: string[]): Promise<void> {
  const args = ["-p", String(port), "-q", "1", "-t", topic, "-l", "-i", `pub-${topic}`];
  await run("mosquitto_pub", args, payloads.join("\n") + "\n");
}

/** The payloads of `count` messages read from `filter` (a `$replay/…` one: from the log). */
async function read(port: number, filter: string, count: number): Promise<string[]> {
  const args = ["-p", String(port), "-q", "1", "-t", filter, "-C", String(count), "-W", "30"];
  return (await run("mosquitto_sub", args)).split("\n").filter((l) => l !== "");
}

async function httpText(gw: GatewayProcess, path: string): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${gw.httpPort}${path}`);
  return await res.text();
}

/** A metric's value in /metrics (0 when the series is absent). */
async function metric(gw: GatewayProcess, series: string): Promise<number> {
  const line = (await httpText(gw, "/metrics")).split("\n").find((l) => l.startsWith(series + " "));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

/** The gateway's wall clock now, as /status.json reports it. */
async function gatewayNow(gw: GatewayProcess): Promise<number> {
  return (JSON.parse(await httpText(gw, "/status.json")) as { time_ms: number }).time_ms;
}

function jumpLines(gw: GatewayProcess): string[] {
  return gw.output.join("").split("\n").filter((l) => l.includes(JUMP_LINE));
}

/** Waits for the jump's warn line (the gateway looks at its clock every second). */
async function jumpLogged(gw: GatewayProcess): Promise<void> {
  await waitFor(() => jumpLines(gw).length > 0, 10_000, "the jump's warn line");
}

/**
 * Two retention intervals: what the acceptance asks to have passed. A pass deletes nothing
 * here, so no event marks it; the wait is the intervals themselves.
 */
function twoRetentionIntervals(): Promise<void> {
  return new Promise((r) => setTimeout(r, 2 * RETENTION_INTERVAL_MS + 500));
}

const range = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

Deno.test({
  name: "a forward jump of 20 days deletes nothing, keeps a stored session, and is logged once",
  ignore: SKIP,
  async fn() {
    const t = await setUp("-20d");
    let gw = await spawnGateway(t.env);
    try {
      assert.ok(Date.now() - await gatewayNow(gw) > 19 * DAY_MS, "the gateway's clock is behind");
      // A stored session, offline before its messages come.
      await run(
        "mosquitto_sub",
        ["-p", String(gw.port), "-c", "-i", "clock-s", "-q", "1"].concat(
          ["-t", "sensors/s/data", "-E"],
        ),
      );
      await publish(gw.port, "sensors/a/data", range("a", 1000));
      await publish(gw.port, "sensors/s/data", range("s", 10));

      await t.clock.set("+0"); // NTP answers
      await jumpLogged(gw);
      assert.ok(Math.abs(Date.now() - await gatewayNow(gw)) < 60_000, "the clock is right now");
      await twoRetentionIntervals();

      assert.deepEqual(
        await read(gw.port, "$replay/earliest/sensors/a/data", 1000),
        range("a", 1000),
      );
      assert.equal(await metric(gw, "log_retention_deleted_messages_total"), 0);
      assert.equal(await metric(gw, 'clock_jumps_total{direction="forward"}'), 1);
      const lines = jumpLines(gw);
      assert.equal(lines.length, 1, "one warn line");
      const line = JSON.parse(lines[0]);
      assert.equal(line.level, "warn");
      assert.equal(line.direction, "forward");
      assert.ok(Math.abs(line.step_s - 20 * 86_400) < 60, `step_s ${line.step_s}`);
      const status = JSON.parse(await httpText(gw, "/status.json"));
      assert.equal(status.clock.jumps, 1);
      assert.equal(status.clock.last_jump.direction, "forward");

      const got: string[] = [];
      const back = mqtt.connect(`mqtt://127.0.0.1:${gw.port}`, {
        clientId: "clock-s",
        clean: false,
        reconnectPeriod: 0,
      });
      back.on("message", (_t, payload) => got.push(new TextDecoder().decode(payload)));
      const connack = await new Promise<mqtt.IConnackPacket>((r) => back.once("connect", r));
      assert.equal(connack.sessionPresent, true, "the session survived the jump");
      await waitFor(() => got.length >= 10, 10_000, "the session's 10 messages");
      assert.deepEqual(got, range("s", 10));
      await back.endAsync();

      // A restart after the jump ages what was stored before it as the run before did.
      assert.equal((await gw.stop()).code, 0);
      gw = await spawnGateway(t.env);
      await twoRetentionIntervals();
      assert.deepEqual(
        await read(gw.port, "$replay/earliest/sensors/a/data", 1000),
        range("a", 1000),
      );
      assert.equal(await metric(gw, "log_retention_deleted_messages_total"), 0);
      assert.equal(jumpLines(gw).length, 0, "a restart is not a jump");
    } finally {
      await gw.stop();
      await t.remove();
    }
  },
});

Deno.test({
  name: "a backward jump of 20 days deletes nothing, keeps the order, and $replay/time: finds it",
  ignore: SKIP,
  async fn() {
    const t = await setUp("+0");
    const gw = await spawnGateway(t.env);
    try {
      await publish(gw.port, "sensors/a/data", range("p1-", 500));
      await t.clock.set("-20d"); // a clock that was ahead is set right
      await jumpLogged(gw);
      const between = await gatewayNow(gw); // the clock between the two phases
      assert.ok(Date.now() - between > 19 * DAY_MS, "the clock went back");
      await publish(gw.port, "sensors/a/data", range("p2-", 500));
      await twoRetentionIntervals();

      const all = [...range("p1-", 500), ...range("p2-", 500)];
      assert.deepEqual(await read(gw.port, "$replay/earliest/sensors/a/data", 1000), all);
      assert.equal(await metric(gw, "log_retention_deleted_messages_total"), 0);
      assert.equal(await metric(gw, 'clock_jumps_total{direction="backward"}'), 1);
      assert.equal(JSON.parse(jumpLines(gw)[0]).direction, "backward");
      // The first phase is stamped after `between` (its clock was ahead): the replay starts at
      // the first message stamped at or after the asked time, and the second phase follows.
      const replayed = await read(gw.port, `$replay/time:${between}/sensors/a/data`, 1000);
      assert.deepEqual(replayed, all);
    } finally {
      await gw.stop();
      await t.remove();
    }
  },
});

Deno.test({
  name: "forward mode, uplink down: forward_lag_seconds counts real time over a 20-day jump",
  ignore: SKIP,
  async fn() {
    const t = await setUp("-20d");
    const gw = await spawnGateway({
      ...t.env,
      IGGY_MQTT_FORWARD_ENABLED: "true",
      IGGY_MQTT_IGGY_ADDRESS: `127.0.0.1:${freePort()}`, // nothing listens: the uplink is down
      IGGY_MQTT_IGGY_PASSWORD: "iggy",
    });
    try {
      await publish(gw.port, "sensors/a/data", range("a", 1000));
      const lagging = async () => await metric(gw, "forward_lag_messages") === 1000;
      await waitFor(lagging, 10_000, "1000 messages waiting");
      await t.clock.set("+0");
      await jumpLogged(gw);
      const lag = await metric(gw, "forward_lag_seconds");
      assert.ok(lag < 60, `forward_lag_seconds ${lag}`);
      await twoRetentionIntervals();
      assert.equal(await metric(gw, "forward_lag_messages"), 1000, "nothing deleted");
      assert.ok(await metric(gw, "forward_lag_seconds") < 60);
    } finally {
      await gw.stop();
      await t.remove();
    }
  },
});

const NO_LEDGER_WARN = "Wall clock reads earlier than the newest stored message";
const STOP_NOT_COUNTED = "The time the gateway was stopped does not count toward stored ages";

/**
 * A store written with the clock at `writtenAt`, its clock ledger then deleted (as a store from
 * a version without one has none), restarted with the true clock: the lines the restart logged
 * about the clock, after two retention intervals in which all 1,000 messages stayed.
 */
async function restartWithoutLedger(writtenAt: string): Promise<Record<string, unknown>[]> {
  const t = await setUp(writtenAt);
  let gw = await spawnGateway(t.env);
  try {
    await publish(gw.port, "sensors/a/data", range("a", 1000));
    assert.equal((await gw.stop()).code, 0);
    await Deno.remove(`${ROOT}${t.env.IGGY_MQTT_EMBEDDED_PATH}-clock.json`);
    await t.clock.set("+0");
    gw = await spawnGateway(t.env);
    await twoRetentionIntervals();
    assert.deepEqual(
      await read(gw.port, "$replay/earliest/sensors/a/data", 1000),
      range("a", 1000),
    );
    assert.equal(await metric(gw, "log_retention_deleted_messages_total"), 0);
    return gw.output.join("").split("\n").filter((l) =>
      l.includes(NO_LEDGER_WARN) || l.includes(STOP_NOT_COUNTED)
    ).map((l) => JSON.parse(l));
  } finally {
    await gw.stop();
    await t.remove();
  }
}

Deno.test({
  name: "no clock ledger, a store written 20 days ahead: one warn line names both times",
  ignore: SKIP,
  async fn() {
    const lines = await restartWithoutLedger("+20d");
    assert.equal(lines.length, 1, JSON.stringify(lines));
    assert.equal(lines[0].level, "warn");
    const [now, newest] = [
      Date.parse(String(lines[0].now)),
      Date.parse(String(lines[0].newest_stored)),
    ];
    assert.ok(Math.abs(Date.now() - now) < 60_000, `now ${lines[0].now}`);
    assert.ok(Math.abs(newest - now - 20 * DAY_MS) < 60_000, `newest ${lines[0].newest_stored}`);
  },
});

Deno.test({
  name:
    "no clock ledger, a store written 20 days behind: the 20 days do not count (7-day retention deletes nothing)",
  ignore: SKIP,
  async fn() {
    const lines = await restartWithoutLedger("-20d");
    assert.equal(lines.length, 1, JSON.stringify(lines));
    assert.equal(lines[0].level, "info");
    assert.ok(Math.abs(Number(lines[0].stopped_s) - 20 * 86_400) < 60, `${lines[0].stopped_s}`);
  },
});
