/**
 * Admin actions with real clients, over HTTP and through the CLI subcommands (`clients`,
 * `disconnect`, `sessions`, `drop-session`, `topics`, `log-level`) run as an operator runs
 * them: `mosquitto_sub` (MQTT 3.1.1, clean session off; it reconnects by itself) and MQTT.js
 * (MQTT 5 with a session expiry, 3.1.1 with clean session off) are listed, disconnected with
 * and without their stored sessions (MQTT 5: DISCONNECT 0x98),
 * their sessions listed and dropped; without the token every write action is refused and
 * logged, and the clients stay.
 *
 * @module
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import {
  HAS_MOSQUITTO_CLIENTS,
  startGateway,
  type TestGateway,
  waitFor,
} from "../helpers/gateway.ts";
import { cli, ownStderrLines, ROOT, STACK_FRAME } from "../helpers/cli.ts";

const TOKEN = "admin-test-token-0123456789abcdef";
const SKIP = HAS_MOSQUITTO_CLIENTS ? "" : " [SKIPPED: mosquitto-clients not installed]";

type Body = Record<string, unknown> & { error?: string };

async function http(
  gw: TestGateway,
  method: "GET" | "POST",
  path: string,
  token?: string,
): Promise<{ status: number; body: Body }> {
  const res = await fetch(`http://127.0.0.1:${gw.httpPort}/admin/${path}`, {
    method,
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
  });
  return { status: res.status, body: await res.json() };
}

/** The CLI against this gateway, with or without the token in its environment. */
function admin(gw: TestGateway, args: string[], token: string | null = TOKEN) {
  const url = `http://127.0.0.1:${gw.httpPort}`;
  const [command, ...rest] = args;
  return cli([command, "--url", url, ...rest], {
    env: token === null ? {} : { IGGY_MQTT_HTTP_ADMIN_TOKEN: token },
  });
}

/** `mosquitto_sub` with clean session off (-c): a 3.1.1 client with a stored session. */
function mosquittoSub(gw: TestGateway, id: string): Deno.ChildProcess {
  return new Deno.Command("mosquitto_sub", {
    args: ["-h", "127.0.0.1", "-p", String(gw.port), "-V", "mqttv311", "-i", id, "-c", "-q", "1"]
      .concat(["-t", "sensors/+/data"]),
    stdout: "piped",
    stderr: "piped",
  }).spawn();
}

function ids(body: Body, field: string): string[] {
  return (body[field] as { client_id: string }[]).map((r) => r.client_id).sort();
}

Deno.test(`admin actions over HTTP and the CLI with mosquitto_sub (3.1.1) and MQTT.js (5)${SKIP}`, {
  ignore: !HAS_MOSQUITTO_CLIENTS,
}, async () => {
  const gw = await startGateway({ env: { IGGY_MQTT_HTTP_ADMIN_TOKEN: TOKEN } });
  const sub = mosquittoSub(gw, "dev-311");
  const v5 = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
    protocolVersion: 5,
    clientId: "dev-5",
    clean: false,
    properties: { sessionExpiryInterval: 3600 },
    reconnectPeriod: 0,
  });
  const v5Reasons: number[] = [];
  v5.on("disconnect", (p) => v5Reasons.push(p.reasonCode ?? -1));
  try {
    await v5.subscribeAsync("sensors/+/data", { qos: 1 });
    await v5.publishAsync("sensors/s-1/data", "21.5", { qos: 1 });
    await waitFor(async () => ids((await http(gw, "GET", "clients")).body, "clients").length === 2);

    // Listing, over HTTP and the CLI.
    const listed = (await http(gw, "GET", "clients")).body;
    assert.deepEqual(ids(listed, "clients"), ["dev-311", "dev-5"]);
    const rows = listed.clients as Record<string, unknown>[];
    const five = rows.find((r) => r.client_id === "dev-5")!;
    assert.equal(five.protocol, "5");
    assert.equal(five.listener, "tcp");
    assert.equal(five.messages_in, 1);
    assert.equal(five.stored_session, true);
    assert.equal(five.address, "127.0.0.1");
    assert.equal(rows.find((r) => r.client_id === "dev-311")!.protocol, "3.1.1");
    const table = await admin(gw, ["clients"]);
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, /^CLIENT ID\s+USER\s+ADDRESS/m);
    assert.match(table.stdout, /^dev-311\s+\(anonymous\)\s+127\.0\.0\.1\s+tcp\s+3\.1\.1/m);
    assert.match(table.stdout, /\(2 of 2 clients\)/);
    const sessions = await admin(gw, ["sessions", "--json"]);
    assert.deepEqual(
      sessions.stdout.trim().split("\n").map((l) => JSON.parse(l).client_id).sort(),
      ["dev-311", "dev-5"],
    );
    const topics = (await http(gw, "GET", "topics")).body.topics as Record<string, unknown>[];
    const data = topics.find((t) => t.stream === "sensors" && t.topic === "sensor_data")!;
    assert.equal(data.messages, 1);
    assert.ok((data.bytes as number) >= 4, "the payload's bytes at least");
    const parts = await admin(gw, ["topics"]);
    assert.match(parts.stdout, /^sensors\s+sensor_data\s+\d\s+1\s+\d+\s+0\.\.0$/m);
    assert.match(parts.stdout, /^sensors\s+sensor_data\s+\d\s+0\s+0\s+-$/m, "an empty partition");
    assert.match(parts.stdout, /^\(\d+ partitions of \d+ of \d+ topics\)$/m);

    // Without the token (and with a wrong one) every write is refused, logged, and does nothing.
    for (const token of [undefined, "wrong"]) {
      for (const path of ["clients/disconnect?client_id=dev-5", "sessions/drop?client_id=x"]) {
        const r = await http(gw, "POST", path, token);
        assert.equal(r.status, 401, path);
      }
      assert.equal((await http(gw, "POST", "log-level?level=error", token)).status, 401);
    }
    const refusedCli = await admin(gw, ["disconnect", "dev-5"], null);
    assert.equal(refusedCli.code, 1);
    assert.deepEqual(ownStderrLines(refusedCli.stderr), [
      "clients/disconnect: missing Authorization: Bearer <admin token>",
    ]);
    assert.doesNotMatch(refusedCli.stderr, STACK_FRAME);
    assert.equal(gw.view.logLevel, "debug");
    assert.ok(gw.logs.some((l) => l.includes('"Admin action refused"')), "refusals logged");
    assert.equal(v5Reasons.length, 0, "the MQTT 5 client is still connected");

    // MQTT 5 over HTTP: DISCONNECT 0x98, its session stays stored (offline).
    const off = await http(gw, "POST", "clients/disconnect?client_id=dev-5", TOKEN);
    assert.equal(off.status, 200);
    assert.deepEqual(off.body, {
      client_id: "dev-5",
      disconnected: true,
      protocol: "5",
      session_dropped: false,
    });
    await waitFor(() => v5Reasons.length === 1, 5000, "DISCONNECT at dev-5");
    assert.equal(v5Reasons[0], 0x98);
    const stored = (await http(gw, "GET", "sessions")).body.sessions as Record<string, unknown>[];
    const s5 = stored.find((s) => s.client_id === "dev-5")!;
    assert.equal(s5.connected, false);
    assert.deepEqual(s5.subscriptions, ["sensors/+/data"]);
    assert.ok(gw.logs.some((l) => l.includes('"Admin action: client disconnected"')));

    // Its stored session dropped through the CLI; a second drop finds none.
    const dropped = await admin(gw, ["drop-session", "dev-5"]);
    assert.equal(dropped.code, 0, dropped.stderr);
    assert.equal(dropped.stdout.trim(), 'dropped the stored session of "dev-5"');
    assert.equal(gw.view.storedSession("dev-5"), undefined);
    const again = await http(gw, "POST", "sessions/drop?client_id=dev-5", TOKEN);
    assert.equal(again.status, 404);
    assert.ok(gw.logs.some((l) => l.includes('"Admin action: stored session dropped"')));

    // A connected client's session is not dropped under it: 409, saying what to do instead.
    const busy = await http(gw, "POST", "sessions/drop?client_id=dev-311", TOKEN);
    assert.equal(busy.status, 409);
    assert.match(busy.body.error!, /disconnect it with discard_session=true/);

    // mosquitto_sub over HTTP, its session kept: it reconnects on its own (libmosquitto
    // does) and comes back as a new connection of the same stored session.
    const first = rows.find((r) => r.client_id === "dev-311")!;
    const kicked = await http(gw, "POST", "clients/disconnect?client_id=dev-311", TOKEN);
    assert.equal(kicked.status, 200);
    assert.equal(kicked.body.protocol, "3.1.1");
    await waitFor(
      async () => {
        const back = ((await http(gw, "GET", "clients")).body.clients as Record<string, unknown>[])
          .find((r) => r.client_id === "dev-311");
        return back !== undefined && (back.since_ms as number) > (first.since_ms as number);
      },
      10_000,
      "mosquitto_sub to reconnect",
    );
    assert.ok(gw.view.storedSession("dev-311") !== undefined, "its session stays");

    // MQTT 3.1.1 through the CLI, with its session: MQTT.js sees its socket close.
    const js311 = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
      protocolVersion: 4,
      clientId: "js-311",
      clean: false,
      reconnectPeriod: 0,
    });
    await js311.subscribeAsync("sensors/+/data", { qos: 1 });
    const closed = new Promise<void>((r) => js311.once("close", () => r()));
    const gone = await admin(gw, ["disconnect", "--discard-session", "js-311"]);
    assert.equal(gone.code, 0, gone.stderr);
    assert.equal(
      gone.stdout.trim(),
      'disconnected "js-311" (MQTT 3.1.1); its stored session dropped',
    );
    await closed;
    js311.end(true);
    assert.equal(gw.view.storedSession("js-311"), undefined);
    assert.deepEqual(ids((await http(gw, "GET", "clients")).body, "clients"), ["dev-311"]);
    assert.deepEqual(ids((await http(gw, "GET", "sessions")).body, "sessions"), ["dev-311"]);
    const notThere = await admin(gw, ["disconnect", "js-311"]);
    assert.equal(notThere.code, 1);
    assert.deepEqual(ownStderrLines(notThere.stderr), [
      'clients/disconnect: no client "js-311" is connected',
    ]);

    // The other way round: the CLI disconnects without the session, HTTP drops it after.
    const v5b = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
      protocolVersion: 5,
      clientId: "js-5b",
      clean: false,
      properties: { sessionExpiryInterval: 600 },
      reconnectPeriod: 0,
    });
    const v5bReason = new Promise<number>((r) =>
      v5b.once("disconnect", (p) => r(p.reasonCode ?? -1))
    );
    await v5b.subscribeAsync("sensors/+/data", { qos: 1 });
    const kept = await admin(gw, ["disconnect", "js-5b"]);
    assert.equal(kept.code, 0, kept.stderr);
    assert.equal(kept.stdout.trim(), 'disconnected "js-5b" (MQTT 5)');
    assert.equal(await v5bReason, 0x98);
    v5b.end(true);
    await waitFor(() => gw.view.storedSession("js-5b")?.offlineSinceMs !== null);
    const httpDrop = await http(gw, "POST", "sessions/drop?client_id=js-5b", TOKEN);
    assert.equal(httpDrop.status, 200);
    assert.deepEqual(httpDrop.body, { client_id: "js-5b", dropped: true });
    assert.equal(gw.view.storedSession("js-5b"), undefined);

    // The log level, read and changed at run time.
    assert.equal((await admin(gw, ["log-level"])).stdout.trim(), "log level debug");
    const changed = await admin(gw, ["log-level", "warn"]);
    assert.equal(changed.stdout.trim(), "log level warn (was debug)");
    assert.equal(gw.view.logLevel, "warn");
    assert.ok(gw.logs.some((l) => l.includes('"Admin action: log level changed"')));
    const bad = await http(gw, "POST", "log-level?level=loud", TOKEN);
    assert.equal(bad.status, 400);
    assert.equal(gw.view.logLevel, "warn");
  } finally {
    v5.end(true);
    try {
      sub.kill();
    } catch { /* exited */ }
    await sub.stdout.cancel().catch(() => {});
    await sub.stderr.cancel().catch(() => {});
    await sub.status;
    await gw.stop();
  }
});

Deno.test("admin write actions without http.admin_token are all refused (403) and logged", async () => {
  const gw = await startGateway();
  try {
    for (const path of ["clients/disconnect?client_id=a", "sessions/drop?client_id=a"]) {
      const r = await http(gw, "POST", path, "anything");
      assert.equal(r.status, 403);
      assert.match(r.body.error!, /IGGY_MQTT_HTTP_ADMIN_TOKEN/);
    }
    assert.equal((await http(gw, "POST", "log-level?level=error", "x")).status, 403);
    assert.equal(gw.view.logLevel, "debug");
    const refused = gw.logs.filter((l) => l.includes('"Admin action refused"'));
    assert.equal(refused.length, 3);
    assert.match(refused[0], /"action":"POST \/admin\/clients\/disconnect"/);
    // Reads stay open, as the status page is; a write method on a read is refused.
    assert.equal((await http(gw, "GET", "clients")).status, 200);
    assert.equal((await http(gw, "POST", "clients", "x")).status, 405);
    assert.equal((await http(gw, "GET", "clients/disconnect")).status, 405);
    assert.equal((await http(gw, "GET", "nothing")).status, 404);
    const other = await fetch(`http://127.0.0.1:${gw.httpPort}/status.json`, { method: "POST" });
    assert.equal(other.status, 405, "only /admin/ takes POST");
    await other.body?.cancel();
  } finally {
    await gw.stop();
  }
});

Deno.test("http.admin_token in the config file is refused in one line naming its variable", async () => {
  // Inside ./data: the permission set lets the gateway read config files there.
  const file = `data/admin-token-${crypto.randomUUID()}.toml`;
  await Deno.mkdir(`${ROOT}data`, { recursive: true });
  try {
    await Deno.writeTextFile(`${ROOT}${file}`, '[http]\nadmin_token = "s3cret"\n');
    const r = await cli(["clients", "--config", file]);
    assert.equal(r.code, 1);
    assert.deepEqual(ownStderrLines(r.stderr), [
      'Invalid config key "http.admin_token": is a secret; set it with IGGY_MQTT_HTTP_ADMIN_TOKEN, not in the file',
    ]);
    const off = await cli(["clients", "--url", "http://127.0.0.1:1"]);
    assert.equal(off.code, 1);
    assert.match(
      ownStderrLines(off.stderr).join("\n"),
      /^Cannot reach the gateway at http:\/\/127\.0\.0\.1:1: /,
    );
  } finally {
    await Deno.remove(`${ROOT}${file}`);
  }
});
