/**
 * The session scenarios of the Eclipse Paho interoperability tests, in MQTT 3.1.1 and in MQTT 5,
 * with paho-mqtt 2.1.0 (`tests/clients/paho_sessions.py`): offline message queueing, overlapping
 * subscriptions, redelivery on reconnect, session expiry (3.1.1: `session.expiry_s`; 5: the
 * client's Session Expiry Interval), at the suite's QoS levels (QoS 2 included).
 */
import assert from "node:assert/strict";
import { hasCommand, run, startGateway, type TestGateway, waitFor } from "../helpers/gateway.ts";
import { opts } from "./_subscribe_helpers.ts";

const SCRIPT = new URL("../clients/paho_sessions.py", import.meta.url).pathname;
const HAS_PAHO = hasCommand("python3") &&
  new Deno.Command("python3", { args: ["-c", "import paho.mqtt"], stderr: "null" }).outputSync()
    .success;
if (!HAS_PAHO) {
  console.warn("WARNING: python3 with paho-mqtt missing; the Paho scenarios are SKIPPED.");
}

async function scenario(gw: TestGateway, name: string, version = "3.1.1"): Promise<string> {
  const r = await run("python3", [SCRIPT, String(gw.port), name, version]);
  assert.equal(r.code, 0, `${name}: ${r.stdout}${r.stderr}`);
  assert.match(r.stdout, /\npass\n$/);
  return r.stdout;
}

for (const name of ["offline_queueing", "overlapping", "redelivery"]) {
  Deno.test({
    name: `Paho interoperability, MQTT 3.1.1: ${name.replace("_", " ")}`,
    ignore: !HAS_PAHO,
    ...opts,
    async fn() {
      const gw = await startGateway();
      try {
        await scenario(gw, name);
      } finally {
        await gw.stop();
      }
    },
  });
}

Deno.test({
  name: "Paho interoperability, MQTT 3.1.1: session expiry (session.expiry_s = 1)",
  ignore: !HAS_PAHO,
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_SESSION_EXPIRY_S: "1" } });
    try {
      await scenario(gw, "expiry_before");
      await waitFor(() => gw.view.storedSession("expiring") === undefined, 5000, "expiry");
      await scenario(gw, "expiry_after");
    } finally {
      await gw.stop();
    }
  },
});

for (const name of ["offline_queueing", "overlapping", "redelivery"]) {
  Deno.test({
    name: `Paho interoperability, MQTT 5: ${name.replace("_", " ")}`,
    ignore: !HAS_PAHO,
    ...opts,
    async fn() {
      const gw = await startGateway();
      try {
        await scenario(gw, name, "5");
      } finally {
        await gw.stop();
      }
    },
  });
}

Deno.test({
  name: "Paho interoperability, MQTT 5: session expiry (the client's Session Expiry Interval, 1 s)",
  ignore: !HAS_PAHO,
  ...opts,
  async fn() {
    // session.expiry_s = 1 only makes the expiry sweep frequent (its interval follows it).
    const gw = await startGateway({ env: { IGGY_MQTT_SESSION_EXPIRY_S: "1" } });
    try {
      await scenario(gw, "expiry_before", "5");
      await waitFor(() => gw.view.storedSession("expiring") === undefined, 5000, "expiry");
      await scenario(gw, "expiry_after", "5");
    } finally {
      await gw.stop();
    }
  },
});
