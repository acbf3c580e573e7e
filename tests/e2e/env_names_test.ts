/**
 * A mistyped IGGY_MQTT_ variable stops every start path, as an operator starts the gateway:
 * `deno task start` and `deno task start:epoll` run `check --env-only` before `run` (the systemd
 * unit's `ExecStartPre=` runs the same command: `systemd_unit_test.ts`), and `run` alone still
 * refuses the word slips it looks for. That `deno task start` still starts with right names is
 * the README test's (`readme_commands_test.ts`).
 */
import assert from "node:assert/strict";
import { run } from "../helpers/gateway.ts";
import { cli, ownStderrLines, ROOT, STACK_FRAME } from "../helpers/cli.ts";

const DENO = Deno.execPath();
/** Nothing a started gateway would bind or write outside a temp dir, should the check let it by. */
const QUIET = {
  IGGY_MQTT_LISTENERS_TCP: "127.0.0.1:0",
  IGGY_MQTT_LISTENERS_WS: "",
  IGGY_MQTT_LISTENERS_HTTP: "",
};

for (const task of ["start", "start:epoll"]) {
  for (
    const [name, meant] of [
      ["IGGY_MQTT_FORWARD_ENABLE", "IGGY_MQTT_FORWARD_ENABLED"],
      ["iggy_mqtt_forward_enabled", "IGGY_MQTT_FORWARD_ENABLED"],
      ["IGGY_MQTT_LIMTS_MAX_PACKET_BYTES", "IGGY_MQTT_LIMITS_MAX_PACKET_BYTES"],
    ]
  ) {
    Deno.test(`deno task ${task} with ${name}=… refuses to start, naming ${meant}`, async () => {
      const r = await run(DENO, ["task", task], {
        cwd: ROOT,
        env: { ...QUIET, [name]: "true" },
        timeoutMs: 60_000,
      });
      assert.equal(r.code, 1, r.stdout + r.stderr);
      const lines = ownStderrLines(r.stderr).filter((l) => !l.startsWith("Task "));
      assert.equal(lines.length, 1, lines.join("\n"));
      assert.match(lines[0], new RegExp(`^Invalid config key "${name}": .*did you mean ${meant} `));
      assert.doesNotMatch(r.stderr, STACK_FRAME);
      assert.doesNotMatch(r.stdout, /Gateway started/);
    });
  }
}

Deno.test("check --env-only is silent and exits 0 when every IGGY_MQTT_ name is a key's", async () => {
  const r = await cli(["check", "--env-only"], { env: { IGGY_MQTT_FORWARD_ENABLED: "false" } });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, "");
  assert.deepEqual(ownStderrLines(r.stderr), []);
});

Deno.test("run alone refuses a lower-case name and a word slip (it does not look for every slip)", async () => {
  for (
    const [name, meant] of [
      ["iggy_mqtt_limits_max_packet_bytes", "IGGY_MQTT_LIMITS_MAX_PACKET_BYTES"],
      ["IGGY_MQTT_LISTENER_TCP", "IGGY_MQTT_LISTENERS_TCP"],
    ]
  ) {
    const r = await cli(["run"], { env: { ...QUIET, [name]: "1" } });
    assert.equal(r.code, 1, r.stdout);
    assert.match(ownStderrLines(r.stderr).join("\n"), new RegExp(`did you mean ${meant} `));
  }
});
