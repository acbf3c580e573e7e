/**
 * docs/OPERATIONS.md "A device PKI with openssl, step by step", run verbatim: the first block
 * (CA, server certificate with DNS and IP names, device certificates, a revocation, the CRL)
 * as one bash script in an empty directory, then a gateway on 127.0.0.1:8883 with what the
 * recipe made, then each command of the second block from the directory holding `pki/`: the
 * valid device's `mosquitto_pub --cert` is stored, the revoked device is refused. Skipped loudly
 * without openssl, mosquitto_pub, or with port 8883 taken.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  HAS_MOSQUITTO_CLIENTS,
  hasCommand,
  run,
  startGateway,
  waitFor,
} from "../helpers/gateway.ts";
import { ROOT } from "../helpers/cli.ts";

const DOC = await Deno.readTextFile(`${ROOT}docs/OPERATIONS.md`);
const HEADING = "#### A device PKI with openssl, step by step";

/** The `sh` blocks of the section under {@link HEADING}, as written. */
function recipeBlocks(): string[] {
  const start = DOC.indexOf(HEADING);
  assert.ok(start >= 0, `${HEADING} in docs/OPERATIONS.md`);
  const rest = DOC.slice(start + HEADING.length);
  const next = rest.search(/\n#{2,4} /); // the next heading (a comment in a block has one #)
  const section = next === -1 ? rest : rest.slice(0, next);
  return [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

function port8883Free(): boolean {
  try {
    Deno.listen({ hostname: "127.0.0.1", port: 8883 }).close();
    return true;
  } catch {
    return false;
  }
}

const missing = !hasCommand("openssl")
  ? "openssl"
  : !HAS_MOSQUITTO_CLIENTS
  ? "mosquitto-clients"
  : !port8883Free()
  ? "port 8883 free"
  : null;
if (missing !== null) console.warn(`WARNING: the PKI recipe test is SKIPPED: needs ${missing}`);

Deno.test({
  name: `the PKI recipe of OPERATIONS runs verbatim and ends in a stored mosquitto_pub --cert${
    missing === null ? "" : ` [SKIPPED: needs ${missing}]`
  }`,
  ignore: missing !== null,
  async fn() {
    const blocks = recipeBlocks();
    assert.equal(blocks.length, 2, "the recipe, then the devices' commands");
    const dir = await Deno.makeTempDir({ prefix: "iggy-mqtt-pki-recipe-" });
    let gw: Awaited<ReturnType<typeof startGateway>> | null = null;
    try {
      const made = await run("bash", ["-euo", "pipefail", "-c", blocks[0]], { cwd: dir });
      assert.equal(made.code, 0, made.stderr);
      assert.match(made.stdout, /TLS Web Client Authentication/);
      assert.match(made.stdout, /DNS:gateway\.example, DNS:localhost, IP Address:127\.0\.0\.1/);
      assert.match(made.stdout, /^server\.crt: OK$/m);
      assert.match(made.stdout, /^sensor-7\.crt: OK$/m);
      assert.match(made.stdout, /^sensor-9 is revoked, as it should be$/m);
      const pki = `${dir}/pki`;
      gw = await startGateway({
        env: {
          IGGY_MQTT_LISTENERS_TCP: "",
          IGGY_MQTT_LISTENERS_TLS: "127.0.0.1:8883",
          IGGY_MQTT_LISTENERS_TLS_CERT_FILE: `${pki}/server.crt`,
          IGGY_MQTT_LISTENERS_TLS_KEY_FILE: `${pki}/server.key`,
          IGGY_MQTT_LISTENERS_TLS_CLIENT_AUTH: "require",
          IGGY_MQTT_LISTENERS_TLS_CLIENT_CA_FILE: `${pki}/ca.crt`,
          IGGY_MQTT_LISTENERS_TLS_CRL_FILE: `${pki}/devices.crl`,
          IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "false",
        },
        toml:
          `[[users]]\nusername = "sensor-7"\n[users.permissions.streams.sensors]\nsend_messages = true\n` +
          `[[users]]\nusername = "sensor-9"\n[users.permissions.streams.sensors]\nsend_messages = true\n`,
      });
      const commands = blocks[1].trim().split("\n");
      const ok = await run("bash", ["-c", commands[0]], { cwd: dir });
      assert.equal(ok.code, 0, ok.stderr);
      await waitFor(() => gw!.view.metrics.publishes.get({ outcome: "acked" }) === 1);
      const revoked = await run("bash", ["-c", commands[1]], { cwd: dir });
      assert.equal(revoked.code, 0, "the || echo line ends well");
      assert.match(revoked.stdout, /^sensor-9 refused$/m);
      assert.equal(
        gw.view.metrics.publishes.get({ outcome: "acked" }),
        1,
        "nothing from sensor-9",
      );
      assert.ok(gw.logs.some((l) => l.includes("certificate revoked")), "the log says why");
    } finally {
      await gw?.stop();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
