/**
 * The README's shell commands, run verbatim (`bash -c "<the line as written>"`) in a fresh copy
 * of the repository, as someone who just cloned it would paste them. A copy, because the
 * quick start writes the store under ./data. Every command in a `sh` block is either run here
 * or skipped with its reason in {@link SKIPPED}: a new README command that is neither fails the
 * test, so the README cannot gain a command nobody ran.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { ROOT } from "../helpers/cli.ts";
import { run, waitFor } from "../helpers/gateway.ts";

const opts = {};

/** Each `sh` code block's commands (continuation lines joined, comment-only lines dropped). */
export function shellBlocks(markdown: string): string[][] {
  const blocks: string[][] = [];
  for (const m of markdown.matchAll(/^```sh\n([\s\S]*?)^```$/gm)) {
    const commands: string[] = [];
    for (const line of m[1].replace(/\s*\\\n\s*/g, " ").split("\n")) {
      if (line.trim() !== "" && !line.trim().startsWith("#")) commands.push(line.trim());
    }
    blocks.push(commands);
  }
  return blocks;
}

/** Commands that run on their own, with what their stdout must show. */
const SIMPLE: [RegExp, RegExp][] = [
  [
    /^npx --yes deno@2\.9\.6 task check\s+#/,
    /^OK: config\/topic-map\.toml: 2 rule\(s\), default sensors\/messages_default$/m,
  ],
  [
    /^npx --yes deno@2\.9\.6 task check --map config\/topic-map\.toml$/,
    /^OK: config\/topic-map\.toml: 2 rule\(s\)/m,
  ],
  [
    /^npx --yes deno@2\.9\.6 task explain --json /,
    /^\{"topic":"building\/north\/room\/42\/temp","rule":1,.*\n\{"topic":"foo\/bar","rule":null/m,
  ],
  [
    /^echo -n '[^']+' \| npx --yes deno@2\.9\.6 task hash-password$/,
    /^pbkdf2-sha256\$210000\$\S+\$\S+$/m,
  ],
  [/^npx --yes deno@2\.9\.6 task [a-z-]+ --help$/, /^Usage: iggy-mqtt-gateway [a-z-]+/],
];
/** The quick start's gateway and, while it runs, its `read` of the published message. */
const START = /^npx --yes deno@2\.9\.6 task start\s+#/;
const READ = /^npx --yes deno@2\.9\.6 task read --stream building_north --topic telemetry --json$/;

/** Commands not run here, and why (they are checked by hand; see the commit that lists them). */
const SKIPPED: [RegExp, string][] = [
  [/^npx --yes deno@2\.9\.6 task test(\s+#.*)?$/, "the suite this test belongs to"],
  [/^\.ci\/run(\s+#.*)?$/, "CI itself: runs this suite, then the aarch64 smoke (apt installs)"],
  [
    /^mosquitto_(sub|pub) /,
    "MQTT on the fixed port 1883; here MQTT.js publishes to the gateway's port",
  ],
  [/^sudo /, "root and systemd (install as a service)"],
  [/^npx --yes deno@2\.9\.6 fmt --check && /, "the developer checks, run on the whole repository"],
  [
    /^npx --yes deno@2\.9\.6 task layers(\s+#.*)?$/,
    "CI runs it (.ci/run); its rules have a unit test",
  ],
  [
    /^npx --yes deno@2\.9\.6 task fuzz --seconds 600 /,
    "ten minutes long; tests/fuzz/fuzz_test.ts runs the same targets for a short round",
  ],
  [
    /^npx --yes deno@2\.9\.6 task bench/,
    "minutes long, needs a Mosquitto broker (docs/BENCHMARKS.md)",
  ],
];
/** Whole blocks not run here: the Iggy mode needs an Iggy 0.9.0 server. */
const SKIPPED_BLOCK = /^export IGGY_MQTT_GATEWAY_BACKEND=iggy$/;
/**
 * The forward-mode block runs as one script (its exports apply to its `check`): no Iggy is at
 * the address, and `check --offline` prints the plan, saying it did not log in.
 */
const FORWARD_BLOCK = /^export IGGY_MQTT_FORWARD_ENABLED=true\s/;
const FORWARD_PLAN = /^forward: every message of the embedded log to Iggy at 127\.0\.0\.1:8090 /m;

/** A copy of what a clone holds that the commands use (no .git, no ./data). */
async function copyRepository(): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "iggy-mqtt-readme-" });
  const r = await run("cp", [
    "-r",
    "README.md",
    "deno.json",
    "deno.lock",
    "main.ts",
    "src",
    "config",
    dir,
  ], {
    cwd: ROOT,
  });
  assert.equal(r.code, 0, r.stderr);
  return dir;
}

/** Runs one README line verbatim in `cwd`. */
function bash(line: string, cwd: string) {
  return run("bash", ["-c", line], { cwd, timeoutMs: 120_000 });
}

/**
 * Starts the README's `task start` line verbatim in its own process group (setsid), with the
 * listeners moved to free ports through the environment, so the test holds no fixed port.
 */
async function startGateway(line: string, cwd: string) {
  const child = new Deno.Command("setsid", {
    args: ["bash", "-c", line],
    cwd,
    env: {
      IGGY_MQTT_LISTENERS_TCP: "127.0.0.1:0",
      IGGY_MQTT_LISTENERS_HTTP: "127.0.0.1:0",
      IGGY_MQTT_LISTENERS_WS: "127.0.0.1:0",
    },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const out: string[] = [];
  const err: string[] = [];
  const collect = async (s: ReadableStream<Uint8Array>, into: string[]) => {
    for await (const chunk of s.pipeThrough(new TextDecoderStream())) into.push(chunk);
  };
  // The pipes end when every process of the group has closed them: the gateway included,
  // which may still be draining after npx and deno task have gone.
  const closed = Promise.all([collect(child.stdout, out), collect(child.stderr, err)]).catch(
    () => {},
  );
  const started = () =>
    out.join("").split("\n").find((l) => l.includes('"msg":"Gateway started"')) ?? null;
  const stop = async () => {
    try {
      Deno.kill(-child.pid, "SIGTERM"); // npx, deno task and the gateway together
    } catch { /* already gone */ }
    await child.status;
    await closed;
  };
  try {
    await waitFor(() => started() !== null, 120_000, "the README's gateway to start");
  } catch (e) {
    await stop();
    throw new Error(`${(e as Error).message}; stderr: ${err.join("")}`);
  }
  return { port: JSON.parse(started()!).tcp as number, stop, output: () => out.join("") };
}

Deno.test({
  name: "README: every sh-block command runs verbatim on a fresh copy, or is skipped with a reason",
  ...opts,
  async fn() {
    const blocks = shellBlocks(await Deno.readTextFile(`${ROOT}README.md`));
    const forward = blocks.find((b) => FORWARD_BLOCK.test(b[0]));
    assert.ok(forward, "the forward-mode block");
    const commands = blocks.filter((b) => b !== forward && !b.some((c) => SKIPPED_BLOCK.test(c)))
      .flat();
    const unclassified = commands.filter((c) =>
      ![...SIMPLE.map(([p]) => p), START, READ, ...SKIPPED.map(([p]) => p)].some((p) => p.test(c))
    );
    assert.deepEqual(unclassified, [], "README commands neither run nor skipped");
    const start = commands.find((c) => START.test(c));
    const read = commands.find((c) => READ.test(c));
    assert.ok(start && read, "the quick start's start and read lines");
    assert.ok(commands.some((c) => SIMPLE[4][0].test(c)), "a --help line");

    const dir = await copyRepository();
    try {
      const plan = await bash(forward.join("\n"), dir);
      assert.equal(plan.code, 0, plan.stderr);
      assert.match(plan.stdout, FORWARD_PLAN);
      assert.match(plan.stdout, /^iggy: not logged in \(--offline\)/m);
      for (const command of commands) {
        const want = SIMPLE.find(([p]) => p.test(command))?.[1];
        if (!want) continue;
        const r = await bash(command, dir);
        assert.equal(r.code, 0, `${command}\n${r.stderr}`);
        assert.match(r.stdout, want, command);
      }
      const gateway = await startGateway(start, dir);
      try {
        const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${gateway.port}`, {
          reconnectPeriod: 0,
        });
        await client.publishAsync("building/north/room/42/temp", "21.5", { qos: 1 });
        await client.endAsync();
        const r = await bash(read, dir);
        assert.equal(r.code, 0, r.stderr);
        const m = JSON.parse(r.stdout.trim().split("\n")[0]);
        assert.equal(m.payload, "21.5");
        assert.equal(m.partition, 0); // XXH32("room_42") mod 3, as the README says
        assert.equal(m.headers["mqtt.topic"], "building/north/room/42/temp");
      } finally {
        await gateway.stop();
      }
      assert.match(gateway.output(), /"msg":"Gateway stopped"/);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("shellBlocks() joins continuation lines and drops comments", () => {
  const md = "text\n```sh\n# note\na \\\n  --b c   # why\n\nd\n```\n```toml\nx = 1\n```\n";
  assert.deepEqual(shellBlocks(md), [["a --b c   # why", "d"]]);
});
