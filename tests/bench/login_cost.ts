/**
 * What a login costs the gateway: CONNECTs offered at a fixed rate (default 1,000 a second),
 * each on its own socket (CONNECT, CONNACK, close), against one gateway process, in one run:
 * signed tokens (ES256, EdDSA, RS256, HS256) and `[[users]]` passwords (PBKDF2 at the default
 * 210,000 iterations, and at the minimum 1,000 to show the CONNECT path without the hash).
 * Failed logins are not slowed (`auth.failure_backoff_ms = 0`): a CONNECT that times out would
 * otherwise delay the next scenario's. Reports the CONNECTs answered per second, CONNACK latency from the socket's open (p50/p99/max) and
 * the gateway's CPU per login (utime+stime of its process from /proc).
 *
 *   deno run -A tests/bench/login_cost.ts [connects=1000] [rate=1000]
 *
 * The gateway runs as `deno run -P=gateway main.ts run` with a config file written under
 * config/ (removed at the end); the clients are this process. A scenario whose logins cannot
 * keep up holds at most {@link MAX_IN_FLIGHT} sockets open and offers the rest as they finish.
 *
 * @module
 */
import { connectPacket, RawClient, waitFor } from "../helpers/gateway.ts";
import { hashPassword } from "../../src/access/password.ts";
import { claimsFor, jwksOf, makeSigner, signHs256, signToken } from "../helpers/jwt.ts";
import { cpuTicks, Histogram } from "./_stats.ts";

const CONNECTS = Number(Deno.args[0] ?? 1000);
const RATE = Number(Deno.args[1] ?? 1000);
const MAX_IN_FLIGHT = 500;
const ROOT = new URL("../../", import.meta.url).pathname;
const SECRET = "a shared HS256 secret of more than 32 bytes";

interface Scenario {
  readonly name: string;
  readonly username: string;
  readonly password: string;
}

interface Result {
  readonly name: string;
  readonly ok: number;
  readonly refused: number;
  readonly perSecond: number;
  readonly latency: Histogram;
  readonly cpuMsPerLogin: number;
  readonly cpuPercent: number;
}

/** One CONNECT on its own socket; the CONNACK's return code, -1 when none came. */
async function login(port: number, s: Scenario, i: number): Promise<number> {
  const c = await RawClient.connect(port);
  try {
    await c.send(connectPacket(`bench-${i}`, { username: s.username, password: s.password }));
    const p = await c.readPacket(60_000);
    return p === null ? -1 : p[3];
  } finally {
    c.close();
  }
}

async function measure(pid: number, port: number, s: Scenario): Promise<Result> {
  const latency = new Histogram();
  let ok = 0;
  let refused = 0;
  const cpu0 = cpuTicks(pid);
  const t0 = performance.now();
  const pending = new Set<Promise<void>>();
  for (let i = 0; i < CONNECTS; i++) {
    const due = t0 + (i * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    while (pending.size >= MAX_IN_FLIGHT) await Promise.race(pending);
    const start = performance.now();
    const one: Promise<void> = login(port, s, i).then((code) => {
      latency.recordMs(performance.now() - start);
      code === 0 ? ok++ : refused++;
    }).finally(() => pending.delete(one));
    pending.add(one);
  }
  await Promise.all(pending);
  const wallMs = performance.now() - t0;
  const ticks = cpuTicks(pid) - cpu0;
  return {
    name: s.name,
    ok,
    refused,
    perSecond: (ok + refused) / (wallMs / 1000),
    latency,
    cpuMsPerLogin: (ticks * 10) / CONNECTS,
    cpuPercent: (ticks / (wallMs / 10)) * 100,
  };
}

async function scenarios(): Promise<{ toml: string; jwks: string; list: Scenario[] }> {
  const signers = [
    await makeSigner("ES256", "es"),
    await makeSigner("EdDSA", "ed"),
    await makeSigner("RS256", "rs"),
  ];
  const rights = { mqtt_permissions: { global: { send_messages: true } } };
  const list: Scenario[] = [];
  for (const s of signers) {
    const token = await signToken(s, claimsFor("device-1", rights));
    list.push({ name: `token ${s.alg}`, username: "device-1", password: token });
  }
  const hs = await signHs256(SECRET, claimsFor("device-1", rights));
  list.push({ name: "token HS256", username: "device-1", password: hs });
  let toml = "";
  for (const [user, iterations] of [["user-210k", 210_000], ["user-1k", 1000]] as const) {
    const hash = await hashPassword("pw", iterations);
    toml += `[[users]]\nusername = "${user}"\npassword_hash = "${hash}"\n` +
      `[users.permissions.global]\nsend_messages = true\n`;
    list.push({
      name: `password, PBKDF2 ${iterations} iterations`,
      username: user,
      password: "pw",
    });
  }
  return { toml, jwks: jwksOf(...signers), list };
}

function row(r: Result): string {
  const f = (x: number | null) => x === null ? "-" : x.toFixed(1);
  const l = r.latency.summary();
  return `| ${r.name} | ${r.ok} | ${r.refused} | ${r.perSecond.toFixed(0)} | ${f(l.p50)} | ${
    f(l.p99)
  } | ${f(l.max)} | ${r.cpuMsPerLogin.toFixed(2)} | ${r.cpuPercent.toFixed(0)} |`;
}

async function main(): Promise<void> {
  const id = crypto.randomUUID().slice(0, 8);
  const { toml, jwks, list } = await scenarios();
  const files = { config: `config/.bench-login-${id}.toml`, jwks: `config/.bench-jwks-${id}.json` };
  await Deno.writeTextFile(`${ROOT}${files.jwks}`, jwks);
  await Deno.writeTextFile(
    `${ROOT}${files.config}`,
    `[listeners]\ntcp = "127.0.0.1:0"\nhttp = ""\nws = ""\n[gateway]\nlog_level = "warn"\n` +
      `[auth]\nallow_anonymous = false\nfailure_backoff_ms = 0\njwt_jwks_file = "${files.jwks}"\n` +
      `[embedded]\npath = "data/bench-login-${id}.db"\n[limits]\nmax_connection_rate_per_source = 0\n` +
      toml,
  );
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-P=gateway", "main.ts", "run", "--config", files.config],
    cwd: ROOT,
    env: { IGGY_MQTT_AUTH_JWT_HMAC_SECRET: SECRET, IGGY_MQTT_GATEWAY_LOG_LEVEL: "info" },
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const out: string[] = [];
  (async () => {
    for await (const c of child.stdout.pipeThrough(new TextDecoderStream())) out.push(c);
  })();
  try {
    await waitFor(() => out.join("").includes('"Gateway started"'), 60_000, "gateway start");
    const started = out.join("").split("\n").find((l) => l.includes('"Gateway started"'))!;
    const port = JSON.parse(started).tcp as number;
    console.log(`${CONNECTS} CONNECTs per scenario offered at ${RATE}/s, gateway pid ${child.pid}`);
    console.log(
      "| login | accepted | refused or timed out | answered/s | p50 ms | p99 ms | max ms | gateway CPU ms/login | gateway CPU % |",
    );
    console.log("| --- | --: | --: | --: | --: | --: | --: | --: | --: |");
    await measure(child.pid, port, list[0]); // warm-up: compiled code, a first key import
    for (const s of list) console.log(row(await measure(child.pid, port, s)));
  } finally {
    child.kill("SIGTERM");
    await child.status;
    await Deno.remove(`${ROOT}${files.config}`);
    await Deno.remove(`${ROOT}${files.jwks}`);
    for (const suffix of ["", "-log", "-wal", "-shm"]) {
      await Deno.remove(`${ROOT}data/bench-login-${id}.db${suffix}`, { recursive: true })
        .catch(() => {});
    }
  }
}

if (import.meta.main) await main();
