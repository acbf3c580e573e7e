/**
 * docs/OPERATIONS.md, forward mode, "What reached Iggy": the `read --upstream` lines run verbatim
 * (`bash -c "<the line>"` in the repository root, the forward config in the environment as an
 * operator's file would hold it) against a fake Iggy a forwarding gateway has copied messages
 * to. They print what reached Iggy, with the origin headers; without an Iggy in the config the
 * command says so in one line.
 *
 * @module
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { cli, ownStderrLines, ROOT } from "../helpers/cli.ts";
import { run, startGateway, waitFor } from "../helpers/gateway.ts";
import { FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";

const DOC = await Deno.readTextFile(`${ROOT}docs/OPERATIONS.md`);

/** The `sh` block right after "What reached Iggy". */
function upstreamLines(): string[] {
  const at = DOC.indexOf("**What reached Iggy**");
  assert.ok(at >= 0, '"What reached Iggy" in docs/OPERATIONS.md');
  const block = /^```sh\n([\s\S]*?)^```$/m.exec(DOC.slice(at));
  assert.ok(block !== null);
  return block[1].trim().split("\n");
}

Deno.test("read --upstream, as OPERATIONS shows it, prints what the forwarder put into Iggy", async () => {
  const store = new FakeStore();
  const node = new FakeNode({ dialect: "0.11", store });
  const address = node.listen();
  const forward = {
    IGGY_MQTT_FORWARD_ENABLED: "true",
    IGGY_MQTT_IGGY_ADDRESS: address,
    IGGY_MQTT_IGGY_PROTOCOL: "0.11",
    IGGY_MQTT_IGGY_PASSWORD: "iggy",
  };
  const gw = await startGateway({ env: forward });
  try {
    const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, { reconnectPeriod: 0 });
    for (const v of ["21.5", "21.7", "22.0"]) {
      await c.publishAsync("sensors/s1/data", v, { qos: 1 });
    }
    await c.endAsync();
    // Barrier: the three are in the fake Iggy (Iggy numbers partitions from 1).
    const upstream = () =>
      [1, 2, 3].flatMap((id) => store.payloads("sensors", "sensor_data", id)).length;
    await waitFor(() => upstream() === 3, 15_000, "the forwarder to send all three");
    const [text, json] = upstreamLines();
    assert.equal(
      text,
      "npx --yes deno@2.9.6 task read --upstream --stream sensors --topic sensor_data --count 10",
    );
    const env = {
      ...Deno.env.toObject(),
      ...forward,
      IGGY_MQTT_EMBEDDED_PATH: "data/read-upstream-none.db",
    };
    const t = await run("bash", ["-c", text], { cwd: ROOT, env, timeoutMs: 120_000 });
    assert.equal(t.code, 0, t.stderr);
    const lines = t.stdout.trim().split("\n").filter((l) => /^p\d+@\d+ /.test(l));
    assert.deepEqual(lines.map((l) => l.split(" ").slice(1).join(" ")), [
      "sensors/s1/data 21.5",
      "sensors/s1/data 21.7",
      "sensors/s1/data 22.0",
    ]);
    const j = await run("bash", ["-c", json], { cwd: ROOT, env, timeoutMs: 120_000 });
    assert.equal(j.code, 0, j.stderr);
    const first = JSON.parse(j.stdout.split("\n").find((l) => l.startsWith("{"))!);
    assert.equal(first.payload, "21.5");
    assert.match(first.headers["mqtt.origin"], /^\d+\/0$/);
    assert.equal(first.headers["mqtt.gateway"], gw.config.gateway.id);
  } finally {
    await gw.stop();
    await node.close();
  }
});

Deno.test("read --upstream without an Iggy in the config is one line naming forward.enabled", async () => {
  const r = await cli(["read", "--upstream", "--stream", "s", "--topic", "t"]);
  assert.equal(r.code, 1);
  assert.deepEqual(ownStderrLines(r.stderr), [
    'Invalid config key "forward.enabled": read --upstream reads the Iggy of [iggy]: the config has none (forward.enabled is false and gateway.backend is embedded)',
  ]);
});
