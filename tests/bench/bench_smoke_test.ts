/**
 * Keeps the benchmark harness working in CI: `run.ts --smoke` runs every scenario for about a
 * second against every server and fails when one produced no figures (never a speed check).
 */
import assert from "node:assert/strict";

function installed(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

const HAS_MOSQUITTO = installed("/usr/sbin/mosquitto");

/**
 * Runs `run.ts --smoke` with `args`, asserts it exited 0, and returns its JSON report (the
 * temporary file it was written to is removed).
 */
async function smokeReport(args: string[], timeoutMs: number) {
  const out = await Deno.makeTempFile({ prefix: "bench-smoke-", suffix: ".json" });
  try {
    const r = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        new URL("./run.ts", import.meta.url).pathname,
        "--smoke",
        ...args,
        `--out=${out}`,
      ],
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(timeoutMs),
    }).output();
    const stderr = new TextDecoder().decode(r.stderr);
    assert.equal(r.code, 0, `run.ts --smoke failed:\n${stderr.slice(-3000)}`);
    return JSON.parse(await Deno.readTextFile(out));
  } finally {
    await Deno.remove(out).catch(() => {});
  }
}

Deno.test({
  name: HAS_MOSQUITTO
    ? "bench run.ts --smoke produces figures for every scenario on every server"
    : "SKIPPED — MOSQUITTO NOT INSTALLED: bench run.ts --smoke (apt-get install mosquitto)",
  ignore: !HAS_MOSQUITTO,
  async fn() {
    const report = await smokeReport([], 150_000);
    assert.equal(report.mode, "smoke");
    assert.ok(report.rows.length > 0, "no figures reported");
    // The client-bound marking needs the load generator's own CPU in every scenario run.
    for (const [scenario, runs] of Object.entries(report.raw)) {
      if (scenario === "start" || scenario === "store") continue; // no load generator there
      for (const [server, r] of Object.entries(runs as Record<string, unknown>)) {
        const cpu = (r as { loadgenCpuPct?: unknown } | null)?.loadgenCpuPct;
        assert.ok(
          typeof cpu === "number" && Number.isFinite(cpu),
          `${scenario} on ${server}: no load generator CPU`,
        );
      }
    }
    // Throughput and delivery scenarios run over raw sockets (one epoll loop), and the
    // delivery ones received what they sent: every copy, stamped.
    for (const scenario of ["qos0_1", "qos0_10", "qos1", "qos1_10x2", "fanout", "e2e"]) {
      for (const [server, r] of Object.entries(report.raw[scenario] ?? {})) {
        const run = r as { io?: string; deliveries?: number; missing?: number };
        assert.equal(run.io, "libc-epoll", `${scenario} on ${server}: not over raw sockets`);
        if (scenario !== "fanout" && scenario !== "e2e") continue;
        assert.ok((run.deliveries ?? 0) > 0, `${scenario} on ${server}: no deliveries`);
        assert.equal(run.missing, 0, `${scenario} on ${server}: copies missing`);
      }
    }
    assert.ok(report.raw.fanout && report.raw.e2e, "fan-out and 1:1 did not run");
    // The idle burst runs over raw sockets too, and every connection got its CONNACK.
    for (const [server, r] of Object.entries(report.raw.idle ?? {})) {
      const run = r as { io?: string; connections?: number; connectsPerSec?: number };
      assert.equal(run.io, "libc-epoll", `idle on ${server}: not over raw sockets`);
      assert.ok((run.connectsPerSec ?? 0) > 0, `idle on ${server}: no connects/s`);
    }
    assert.ok(report.raw.idle, "idle did not run");
    // The fleet: every device's readings reached the subscriber; QoS 1 ones were PUBACKed.
    for (const scenario of ["fleet_qos1", "fleet_qos0"]) {
      assert.ok(report.raw[scenario], `${scenario} did not run`);
      for (const [server, r] of Object.entries(report.raw[scenario])) {
        const run = r as { deliveries?: number; missing?: number; pubacks?: number };
        assert.ok((run.deliveries ?? 0) > 0, `${scenario} on ${server}: no deliveries`);
        assert.equal(run.missing, 0, `${scenario} on ${server}: readings missing`);
        if (scenario === "fleet_qos1") assert.ok((run.pubacks ?? 0) > 0, `${server}: no PUBACKs`);
      }
    }
  },
});

Deno.test("bench floor server: PUBACKs after its fsync, and every subscriber gets every message", async () => {
  const { raw } = await smokeReport(
    ["--servers=deno-floor", "--scenarios=fleet_qos1,e2e,qos1_10x2,idle"],
    90_000,
  );
  const fleet = raw.fleet_qos1["deno-floor"];
  assert.ok(fleet.pubacks > 0 && fleet.deliveries > 0, "fleet: no PUBACKs or deliveries");
  assert.equal(fleet.missing, 0, "fleet: readings missing");
  assert.equal(raw.e2e["deno-floor"].missing, 0, "1:1: copies missing");
  assert.ok(raw.qos1_10x2["deno-floor"].msgs > 0, "10×2: nothing PUBACKed");
  // idle is not among the scenarios the floor lists: skipped, and not counted as missing.
  assert.equal(raw.idle?.["deno-floor"], undefined, "ran a scenario it does not list");
});

Deno.test("bench: an unknown scenario or server is refused in one line, before any server starts", async () => {
  for (
    const [args, says] of [
      [["--scenarios=e2e,nope"], "[bench] --scenarios: unknown nope (known: idle, e2e,"],
      [
        ["--servers=gateway,gatway", "--scenarios=e2e"],
        "[bench] --servers: unknown gatway (known:",
      ],
    ] as const
  ) {
    const r = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", new URL("./run.ts", import.meta.url).pathname, "--smoke", ...args],
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(30_000),
    }).output();
    const stderr = new TextDecoder().decode(r.stderr).trim();
    assert.equal(r.code, 2, stderr);
    assert.equal(stderr.split("\n").length, 1, `one line, got:\n${stderr}`);
    assert.ok(stderr.startsWith(says), stderr);
    assert.ok(!stderr.includes("    at "), "no stack trace");
  }
});
