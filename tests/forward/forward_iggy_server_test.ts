/**
 * Forward mode against a real Iggy server (`IGGY_TEST_SERVER_BIN`, an Iggy 0.9 binary): the
 * uplink down while 20 clients publish 100,000 QoS 1 messages, then the server started: all
 * of them in Iggy within 60 s, in per-partition order, none twice; then kill -9 of the server
 * five times while the box forwards under live load: no PUBACKed message lost, none twice.
 * Read back through Iggy. Skipped, loudly, without the binary.
 */
import assert from "node:assert/strict";
import { iggyClient, readTopic } from "../helpers/iggy_client.ts";
import { startIggyServer, untilListening } from "../helpers/iggy_server.ts";
import { freeFixedPort, startGateway, waitFor } from "../helpers/gateway.ts";
import { publisher, type Tally } from "../helpers/qos1_load.ts";

const BIN = Deno.env.get("IGGY_TEST_SERVER_BIN") ?? "";
const CLIENTS = 20;
const TOTAL = Number(Deno.env.get("IGGY_FORWARD_MESSAGES") ?? 100_000);
if (BIN === "") {
  console.warn("WARNING: IGGY_TEST_SERVER_BIN is not set; forward mode against Iggy is SKIPPED.");
}

/** Per partition, the payloads in offset order, read through Iggy. */
async function readBack(address: string, stream: string, topic: string) {
  const b = iggyClient(address, "iggy", "iggy");
  await b.open();
  try {
    const parts = await readTopic(b, stream, topic);
    return parts.map((part) => part.map((m) => ({ payload: new TextDecoder().decode(m.payload) })));
  } finally {
    await b.close();
  }
}

/** Each client's payloads in order within their partition, and no payload twice. */
function check(parts: { payload: string }[][], acked: Set<string>) {
  const count = new Map<string, number>();
  for (const part of parts) {
    const lastSeq = new Map<string, number>();
    for (const { payload } of part) {
      count.set(payload, (count.get(payload) ?? 0) + 1);
      const [client, seq] = payload.split(":");
      assert.ok((lastSeq.get(client) ?? -1) < Number(seq), `${client} in order`);
      lastSeq.set(client, Number(seq));
    }
  }
  const lost = [...acked].filter((p) => !count.has(p));
  const twice = [...count.values()].filter((n) => n > 1).length;
  return { stored: count.size, lost: lost.length, twice };
}

Deno.test({
  name: "forward to Iggy 0.9: uplink down for 100,000 QoS 1 messages, then 5 kill -9 of Iggy",
  ignore: BIN === "",
  async fn() {
    const dataDir = await Deno.makeTempDir({ prefix: "forward-iggy-" });
    const port = freeFixedPort();
    const address = `127.0.0.1:${port}`;
    const stream = `fwd_${crypto.randomUUID().slice(0, 8)}`;
    const gw = await startGateway({
      map: `default_stream = "${stream}"\ndefault_topic = "messages"\n`,
      env: {
        IGGY_MQTT_FORWARD_ENABLED: "true",
        IGGY_MQTT_IGGY_ADDRESS: address,
        IGGY_MQTT_IGGY_PASSWORD: "iggy",
        IGGY_MQTT_IGGY_RECONNECT_MAX_MS: "500",
        IGGY_MQTT_GATEWAY_LOG_LEVEL: "warn",
      },
    });
    const tally: Tally = { sent: 0, acked: new Set() };
    const seqs = Array.from({ length: CLIENTS }, () => ({ n: 0 }));
    let iggy: Deno.ChildProcess | undefined;
    const listening = () => untilListening(port, "Iggy to listen");
    try {
      // 1. Uplink down: 20 clients, TOTAL QoS 1 messages, every one PUBACKed.
      const stop = new AbortController();
      const clients = seqs.map((s, i) =>
        publisher(gw.port, `fwd-${i}`, "fwd/iggy", tally, s, 20, stop.signal)
      );
      await waitFor(() => tally.acked.size >= TOTAL, 120_000, `${TOTAL} PUBACKs`);
      stop.abort();
      await Promise.all(clients);
      const pubacked = tally.acked.size;
      iggy = startIggyServer(BIN, dataDir, port);
      await listening();
      const t0 = performance.now();
      await waitFor(
        () =>
          gw.view.forwarder!.status().lagMessages === 0 &&
          gw.view.forwarder!.counters.sent + gw.view.forwarder!.counters.foundUpstream >=
            pubacked,
        60_000,
        "all forwarded within 60 s",
      );
      const drained = (performance.now() - t0) / 1000;
      let r = check(await readBack(address, stream, "messages"), tally.acked);
      console.log(
        `forward iggy: ${pubacked} PUBACKed offline, in Iggy after ${drained.toFixed(1)} s: ` +
          JSON.stringify(r),
      );
      assert.equal(r.lost, 0);
      assert.equal(r.twice, 0);
      // 2. Five kill -9 of Iggy while the box forwards under live load.
      for (let round = 0; round < 5; round++) {
        const live = new AbortController();
        const load = seqs.map((s, i) =>
          publisher(gw.port, `fwd-${i}`, "fwd/iggy", tally, s, 20, live.signal)
        );
        await new Promise((res) => setTimeout(res, 1000 + Math.random() * 1000));
        iggy.kill("SIGKILL");
        await iggy.status;
        await new Promise((res) => setTimeout(res, 500));
        iggy = startIggyServer(BIN, dataDir, port);
        await listening();
        live.abort();
        await Promise.all(load);
      }
      const fw = gw.view.forwarder!;
      await waitFor(() => fw.status().up && fw.status().lagMessages === 0, 60_000, "caught up");
      console.log(`forward iggy: counters ${JSON.stringify(fw.counters)}`);
      r = check(await readBack(address, stream, "messages"), tally.acked);
      console.log(
        `forward iggy: after 5 kills of Iggy, ${tally.acked.size} PUBACKed: ` + JSON.stringify(r),
      );
      assert.equal(r.lost, 0);
      assert.equal(r.twice, 0);
      // One 'Uplink down' per outage at most (down at start, then five kills), however many
      // partitions and connections saw each one; no per-partition retry at warn.
      const warned = gw.logs.map((l) => JSON.parse(l).msg as string);
      const downs = warned.filter((m) => m === "Uplink down").length;
      assert.ok(downs >= 1 && downs <= 6, `${downs} 'Uplink down' lines for 6 outages`);
      assert.equal(warned.filter((m) => m.startsWith("Forward failed")).length, 0);
    } finally {
      await gw.stop();
      iggy?.kill("SIGKILL");
      await iggy?.status;
      await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    }
  },
});
