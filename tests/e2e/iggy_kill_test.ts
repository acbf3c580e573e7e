/**
 * Iggy dies under load: with `IGGY_TEST_SERVER_BIN` pointing at an Iggy 0.9 server binary,
 * this test starts that server on a temporary data directory, runs QoS 1 load through an
 * Iggy-mode gateway with the default auto-create (fsync enforced), kills the server with
 * SIGKILL several times and restarts it, then reads every partition back through Iggy (not
 * through the gateway) and checks that every PUBACKed message is there.
 *
 * `IGGY_KILL_ROUNDS` (default 5) sets the rounds; `IGGY_KILL_DURABILITY=server_default` runs
 * the same test against the server's default topics (expected to lose messages: the figure
 * is printed, the assertion then only runs for fsync).
 */
import assert from "node:assert/strict";
import { iggyClient, readTopic } from "../helpers/iggy_client.ts";
import { startIggyServer, untilListening } from "../helpers/iggy_server.ts";
import { freeFixedPort, startGateway, waitFor } from "../helpers/gateway.ts";
import { publisher, type Tally } from "../helpers/qos1_load.ts";

const BIN = Deno.env.get("IGGY_TEST_SERVER_BIN") ?? "";
const ROUNDS = Number(Deno.env.get("IGGY_KILL_ROUNDS") ?? 5);
const DURABILITY = Deno.env.get("IGGY_KILL_DURABILITY") ?? "fsync";
const CLIENTS = 10;
const WINDOW = 20;
const TOPIC = "kill/test/topic";
if (BIN === "") {
  console.warn(
    "WARNING: IGGY_TEST_SERVER_BIN is not set; the kill -9 test of an Iggy server is SKIPPED.",
  );
}

/** Every payload stored in stream/topic, with its count, read through Iggy. */
async function readBack(address: string, stream: string, topic: string) {
  const b = iggyClient(address, "iggy", "iggy");
  await b.open();
  try {
    const parts = await readTopic(b, stream, topic);
    assert.ok(parts.length > 0, `${stream}/${topic} exists in Iggy`);
    const found = new Map<string, number>();
    for (const m of parts.flat()) {
      const payload = new TextDecoder().decode(m.payload);
      found.set(payload, (found.get(payload) ?? 0) + 1);
    }
    return found;
  } finally {
    await b.close();
  }
}

Deno.test({
  name: `iggy kill -9: ${ROUNDS} rounds of SIGKILL of the Iggy server under QoS 1 load lose no ` +
    `PUBACKed message (auto-create durability ${DURABILITY})`,
  ignore: BIN === "",
  async fn() {
    const dataDir = await Deno.makeTempDir({ prefix: "iggy-kill-" });
    const iggyPort = freeFixedPort();
    const address = `127.0.0.1:${iggyPort}`;
    const stream = `kill_${crypto.randomUUID().slice(0, 8)}`;
    let iggy = startIggyServer(BIN, dataDir, iggyPort);
    const up = () => untilListening(iggyPort, "the Iggy server to listen");
    await up();
    const gw = await startGateway({
      map: `default_stream = "${stream}"\ndefault_topic = "messages"\n`,
      env: {
        IGGY_MQTT_GATEWAY_BACKEND: "iggy",
        IGGY_MQTT_IGGY_ADDRESS: address,
        IGGY_MQTT_IGGY_USERNAME: "iggy",
        IGGY_MQTT_IGGY_PASSWORD: "iggy",
        IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "true",
        IGGY_MQTT_IGGY_RECONNECT_MAX_MS: "500",
        IGGY_MQTT_IGGY_REQUEST_TIMEOUT_MS: "3000",
        IGGY_MQTT_GATEWAY_LOG_LEVEL: "warn",
        IGGY_MQTT_LOG_AUTO_CREATE_DURABILITY: DURABILITY,
      },
    });
    const tally: Tally = { sent: 0, acked: new Set() };
    const seqs = Array.from({ length: CLIENTS }, () => ({ n: 0 }));
    try {
      for (let round = 0; round < ROUNDS; round++) {
        await waitFor(() => gw.view.readiness().ready, 30_000, "the gateway to be ready");
        const stop = new AbortController();
        const clients = seqs.map((s, i) =>
          publisher(gw.port, `kill-${round}-${i}`, TOPIC, tally, s, WINDOW, stop.signal)
        );
        await new Promise((r) => setTimeout(r, 1000 + Math.random() * 1500));
        iggy.kill("SIGKILL");
        await iggy.status;
        // PUBACKs that were on their way still count; then the publishers stop. Real time: the
        // publishers run on (their window is in tests/helpers/qos1_load.ts) while Iggy is down.
        await new Promise((r) => setTimeout(r, 500));
        stop.abort();
        await Promise.all(clients);
        iggy = startIggyServer(BIN, dataDir, iggyPort);
        await up();
      }
      await waitFor(() => gw.view.readiness().ready, 30_000, "the gateway to be ready");
      await gw.stop();
      const found = await readBack(address, stream, "messages");
      const lost = [...tally.acked].filter((p) => !found.has(p));
      const duplicates = [...found.values()].filter((n) => n > 1).length;
      console.log(
        `iggy kill test (${DURABILITY}): rounds=${ROUNDS} sent=${tally.sent} ` +
          `acked=${tally.acked.size} found=${found.size} duplicates=${duplicates} ` +
          `lost_acknowledged=${lost.length}`,
      );
      assert.ok(tally.acked.size > 0, "some messages were acknowledged");
      if (DURABILITY === "fsync") {
        assert.equal(lost.length, 0, `lost acknowledged messages: ${lost.slice(0, 5)}`);
      }
    } finally {
      await gw.stop();
      try {
        iggy.kill("SIGKILL");
      } catch { /* gone */ }
      await iggy.status;
      await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    }
  },
});
