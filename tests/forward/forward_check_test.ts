/**
 * `check` in forward mode prints the forward plan: where the upstream is, the batch and disk
 * settings, and for each target what exists upstream (on the fake Iggy) or would be created.
 */
import assert from "node:assert/strict";
import { cli, ownStderrLines, STACK_FRAME } from "../helpers/cli.ts";
import { FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";

Deno.test("check prints the forward plan: existing, missing and repartitioned targets", async () => {
  const store = new FakeStore();
  const sensors = store.createStream("sensors");
  store.createTopic(sensors, "sensor_data", 6, new Uint8Array());
  const node = new FakeNode({ dialect: "0.11", store });
  const address = node.listen();
  const dir = await Deno.makeTempDir();
  try {
    const { code, stdout } = await cli(["check"], {
      env: {
        IGGY_MQTT_FORWARD_ENABLED: "true",
        IGGY_MQTT_IGGY_ADDRESS: address,
        IGGY_MQTT_IGGY_PROTOCOL: "0.11",
        IGGY_MQTT_IGGY_PASSWORD: "iggy",
        IGGY_MQTT_EMBEDDED_PATH: `${dir}/gateway.db`,
      },
    });
    assert.equal(code, 0, stdout);
    assert.match(
      stdout,
      new RegExp(`forward: every message of the embedded log to Iggy at ${address}`),
    );
    assert.match(stdout, /store full \(embedded.max_store_bytes \d+\): refuse/);
    assert.match(
      stdout,
      /sensors\/sensor_data \(3 partitions\) → upstream 6 partitions, partition p → p mod 6/,
    );
    assert.match(
      stdout,
      /sensors\/messages_default \(3 partitions\) → missing upstream: created with 3 partitions, fsync/,
    );
  } finally {
    await node.close();
    await Deno.remove(dir, { recursive: true });
  }
});

/** `check` against a fake Iggy of `dialect` whose user iggy has the password "iggy". */
async function checkAgainstFake(
  dialect: "0.11" | "0.12",
  env: Record<string, string>,
  args: string[] = [],
) {
  const node = new FakeNode({ dialect, store: new FakeStore() });
  const address = node.listen();
  const dir = await Deno.makeTempDir();
  try {
    const r = await cli(["check", ...args], {
      env: {
        IGGY_MQTT_IGGY_ADDRESS: address,
        IGGY_MQTT_IGGY_PROTOCOL: "auto",
        IGGY_MQTT_EMBEDDED_PATH: `${dir}/gateway.db`,
        ...env,
      },
    });
    return { ...r, address, lines: ownStderrLines(r.stderr) };
  } finally {
    await node.close();
    await Deno.remove(dir, { recursive: true });
  }
}

const FORWARD = { IGGY_MQTT_FORWARD_ENABLED: "true" };
const IGGY_MODE = { IGGY_MQTT_GATEWAY_BACKEND: "iggy" };

for (const dialect of ["0.11", "0.12"] as const) {
  for (const [mode, env] of [["forward mode", FORWARD], ["Iggy mode", IGGY_MODE]] as const) {
    Deno.test(`check in ${mode} exits 1 naming iggy.password when Iggy ${dialect} refuses it`, async () => {
      const r = await checkAgainstFake(dialect, { ...env, IGGY_MQTT_IGGY_PASSWORD: "wrong" });
      assert.equal(r.code, 1, r.stdout);
      assert.equal(r.stdout, "", "nothing printed before the failure");
      assert.deepEqual(r.lines, [
        `Iggy at ${r.address} refused the login of user "iggy": invalid credentials; check iggy.password (IGGY_MQTT_IGGY_PASSWORD) and iggy.username (IGGY_MQTT_IGGY_USERNAME)`,
      ]);
      assert.doesNotMatch(r.stderr, STACK_FRAME);
      assert.doesNotMatch(r.stderr, /wrong/, "the password is never printed");
    });
  }

  Deno.test(`check in forward mode says what it logged in to (Iggy ${dialect}, iggy.protocol auto)`, async () => {
    const r = await checkAgainstFake(dialect, { ...FORWARD, IGGY_MQTT_IGGY_PASSWORD: "iggy" });
    assert.equal(r.code, 0, r.stderr);
    const server = dialect === "0.11" ? "0.9.0-fake" : "0.10.0-fake";
    const protocol = dialect === "0.11" ? "0.11.0" : "0.12.2";
    assert.match(
      r.stdout,
      new RegExp(
        `^iggy: logged in to Iggy at ${r.address} as user "iggy": Iggy server ${server}, binary protocol ${protocol} \\(dialect ${dialect}, iggy.protocol auto\\)$`,
        "m",
      ),
    );
  });
}

Deno.test("check --offline passes a wrong password in forward mode and says it did not log in", async () => {
  const r = await checkAgainstFake("0.11", { ...FORWARD, IGGY_MQTT_IGGY_PASSWORD: "wrong" }, [
    "--offline",
  ]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(
    r.stdout,
    new RegExp(
      `^iggy: not logged in \\(--offline\\): Iggy at ${r.address}, the credentials and the topics there were not checked$`,
      "m",
    ),
  );
  assert.match(r.stdout, /^forward: upstream not checked \(--offline\)$/m);
  assert.match(r.stdout, /^forward: sensors\/sensor_data \(3 partitions\)$/m);
  assert.doesNotMatch(r.stdout, /logged in to/);
});

Deno.test("check in forward mode exits 1 naming iggy.address when Iggy is unreachable", async () => {
  // A port that was just free: nothing listens there.
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const address = `127.0.0.1:${(l.addr as Deno.NetAddr).port}`;
  l.close();
  const dir = await Deno.makeTempDir();
  try {
    const r = await cli(["check"], {
      env: {
        ...FORWARD,
        IGGY_MQTT_IGGY_ADDRESS: address,
        IGGY_MQTT_IGGY_PASSWORD: "iggy",
        IGGY_MQTT_EMBEDDED_PATH: `${dir}/gateway.db`,
      },
    });
    assert.equal(r.code, 1, r.stdout);
    assert.deepEqual(ownStderrLines(r.stderr), [
      `Iggy at ${address} unreachable: connection refused; check iggy.address (IGGY_MQTT_IGGY_ADDRESS), or run check --offline to skip logging in`,
    ]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
