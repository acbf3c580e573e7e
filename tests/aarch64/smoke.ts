/**
 * aarch64 smoke: the gateway run by the aarch64 Deno under qemu-user, driven from the host with
 * real MQTT clients. Not a `deno test` file (no `_test` suffix): `.ci/run` runs it after the main
 * suite, once it has installed qemu-user and fetched the aarch64 Deno from npm.
 *
 *   deno run -A tests/aarch64/smoke.ts --deno PATH [--qemu qemu-aarch64]
 *     [--sysroot /usr/aarch64-linux-gnu] [--deno-dir DIR] [--expect-version X.Y.Z]
 *     [--timeout-s 270]
 *
 * The steps (_steps.ts): the emulated Deno reports aarch64; the gateway starts with `run
 * -P=gateway main.ts run` (the permission set of `deno task start`, read from deno.json) and
 * /ready is 200; mosquitto_pub QoS 0, QoS 1 and QoS 1 over TLS reach a mosquitto_sub; `read
 * --json` shows them with their headers; SIGKILL under a QoS 1 load from MQTT.js, restart, and
 * every PUBACKed message is stored; SIGHUP reloads a changed topic map and a renewed certificate
 * (new publishes and a live subscription follow); SIGTERM drains under load (exit 0, every
 * PUBACKed message stored). Each prints `aarch64 smoke: step N/M NAME: ok …` or `… FAILED: …`;
 * the last line is `aarch64 smoke: PASSED …` (exit 0) or `aarch64 smoke: FAILED …` (exit 1).
 *
 * Everything lives in its own directory under `data/` (the only place `-P=gateway` may write),
 * on ports the OS picks; it is removed after a pass and kept after a failure. Speed under
 * emulation means nothing: the bounds are generous on purpose, and the whole run has one.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { killEmulated } from "./_emulated.ts";
import { seconds, type Smoke, STEPS } from "./_steps.ts";
import { createSmokeFiles } from "./_store.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

/** Runs the steps in order until one fails or the overall bound is spent; returns the failed one. */
async function runSteps(s: Smoke, deadline: number, boundS: number): Promise<string | null> {
  for (const [i, step] of STEPS.entries()) {
    const label = `aarch64 smoke: step ${i + 1}/${STEPS.length} ${step.name}`;
    const started = performance.now();
    try {
      const budget = Math.min(step.timeoutMs, deadline - Date.now());
      if (budget <= 0) throw new Error(`no time left of the ${boundS} s bound`);
      const what = budget < step.timeoutMs ? `the step (cut to the ${boundS} s bound)` : "the step";
      const detail = await withTimeout(step.run(s), budget, what);
      console.log(`${label}: ok in ${seconds(started)} s (${detail})`);
    } catch (e) {
      console.log(`${label}: FAILED after ${seconds(started)} s: ${(e as Error).message ?? e}`);
      if (s.gateway) console.log(`aarch64 smoke: gateway stderr: ${s.gateway.stderrTail}`);
      return step.name;
    }
  }
  return null;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      deno: { type: "string" },
      qemu: { type: "string", default: "qemu-aarch64" },
      sysroot: { type: "string", default: "/usr/aarch64-linux-gnu" },
      "deno-dir": { type: "string" },
      "expect-version": { type: "string" },
      "timeout-s": { type: "string", default: "270" },
    },
  });
  if (!values.deno) {
    console.log("aarch64 smoke: FAILED: --deno PATH (the aarch64 deno executable) is required");
    return 2;
  }
  const t0 = performance.now();
  const boundS = Number(values["timeout-s"]);
  const files = await createSmokeFiles(ROOT);
  const s: Smoke = {
    emu: {
      qemu: values.qemu,
      sysroot: values.sysroot,
      deno: values.deno,
      denoDir: values["deno-dir"],
      root: ROOT,
      children: new Set(),
    },
    files,
    expectVersion: values["expect-version"],
    gateway: null,
    ports: { tcp: 0, tls: 0, http: 0 },
    killed: null,
    live: {
      q0: `q0-${crypto.randomUUID()}`,
      q1: `q1-${crypto.randomUUID()}`,
      tls: `tls-${crypto.randomUUID()}`,
    },
    cleanups: [],
  };
  const failed = await runSteps(s, Date.now() + boundS * 1000, boundS);
  // What a failed step left running: the emulated gateway and commands, subscribers, loads.
  await killEmulated(s.emu);
  for (const cleanup of s.cleanups) await cleanup();
  if (failed !== null) {
    console.log(
      `aarch64 smoke: FAILED at "${failed}" after ${seconds(t0)} s (files kept in ${files.dir})`,
    );
    return 1;
  }
  await Deno.remove(`${ROOT}${files.dir}`, { recursive: true });
  console.log(`aarch64 smoke: PASSED (${STEPS.length} steps in ${seconds(t0)} s)`);
  return 0;
}

if (import.meta.main) Deno.exit(await main());
