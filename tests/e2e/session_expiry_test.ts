/**
 * Stored sessions expire under the settings as they are now, and leave nothing behind: 2,000
 * clean-session-0 clients (a fleet that makes a new client id per boot: each connects once)
 * store a session under `session.expiry_s` = 86,400; the gateway restarts with 1 once they have
 * all been offline longer than that: the sweep at start expires every one (counted, one log
 * line), a returning id gets session present 0, and once the record topic is compacted neither
 * a record of theirs nor a consumer-offset row in the catalog is left.
 * (The figures are 10,000 sessions and 60 s; 2,000 and 1 s keep this under a minute.)
 */
import assert from "node:assert/strict";
import {
  connectPacket,
  connectRaw,
  RawClient,
  startGateway,
  type TestGateway,
  waitFor,
} from "../helpers/gateway.ts";
import { opts, publishAll, subscribe } from "./_subscribe_helpers.ts";
import { sessionConsumer } from "../../src/session/stored_sessions.ts";

const N = 2_000;
const TOPIC = "building/north/room/42/temp";
const RECORD_TOPIC = { stream: "mqtt_gateway", topic: "sessions", partition: 0 };

/** Consumer-offset rows of stored sessions in the embedded catalog (read-only, beside the gateway). */
async function catalogRows(path: string): Promise<number> {
  const { DatabaseSync } = await import("node:sqlite");
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    const sql = "SELECT count(*) AS n FROM consumer_offsets WHERE consumer LIKE 'mqtt-session-%'";
    return (db.prepare(sql).get() as { n: number }).n;
  } finally {
    db.close();
  }
}

async function connectStored(port: number, id: string) {
  const c = await RawClient.connect(port);
  await c.send(connectPacket(id, { clean: false }));
  const ack = await c.readPacket();
  assert.ok(ack !== null && ack[0] === 0x20, "CONNACK");
  return { c, present: ack[2], code: ack[3] };
}

Deno.test({
  name: "acceptance: 2,000 sessions stored under expiry_s 86,400 expire at the first sweep after " +
    "a restart with a shorter expiry_s (one line); a returning id gets present 0; once compacted no record and no catalog row of theirs is left",
  ...opts,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "iggy-mqtt-expiry-" });
    const start = (env: Record<string, string>): Promise<TestGateway> =>
      startGateway({ env: { IGGY_MQTT_EMBEDDED_PATH: `${dir}/gateway.db`, ...env } });
    let triple = { stream: "", topic: "", partition: 0 };
    let lastOffline = 0;
    try {
      const gw1 = await start({ IGGY_MQTT_SESSION_EXPIRY_S: "86400" });
      try {
        const pub = await connectRaw(gw1.port, "pub");
        await publishAll(pub, [[TOPIC, "before"]]); // a position past 0 is stored at SUBSCRIBE
        pub.close();
        for (let i = 0; i < N; i++) {
          const s = await connectStored(gw1.port, `a-${i}`);
          assert.deepEqual([s.present, s.code], [0, 0]);
          assert.deepEqual(await subscribe(s.c, [[TOPIC, 1]]), [1]);
          s.c.close();
        }
        await waitFor(
          () =>
            [...Array(N).keys()].every((i) =>
              gw1.view.storedSession(`a-${i}`)?.offlineSinceMs != null
            ),
          30_000,
          "every session offline",
        );
        lastOffline = Math.max(
          ...[...Array(N).keys()].map((i) => gw1.view.storedSession(`a-${i}`)!.offlineSinceMs!),
        );
        const [key] = gw1.view.storedSession("a-0")!.triples;
        const [stream, topic, partition] = key.split("\u0000");
        triple = { stream, topic, partition: Number(partition) };
        await waitFor(
          async () => await gw1.view.log.getOffset(sessionConsumer(`a-${N - 1}`), triple) !== null,
          10_000,
          "the last position stored",
        );
      } finally {
        await gw1.stop();
      }

      // Every session offline for longer than the new expiry when the gateway comes back.
      await waitFor(() => Date.now() - lastOffline > 1000, 5000, "a second offline");
      const gw2 = await start({ IGGY_MQTT_SESSION_EXPIRY_S: "1" });
      try {
        const expired = gw2.view.metrics.storedSessionsExpired;
        await waitFor(() => gw2.view.storedSessionCount === 0, 10_000, "every session expired");
        assert.equal(expired.get(), N);
        const lines = gw2.logs.filter((l) => l.includes("Stored sessions expired"));
        assert.equal(lines.length, 1, `one sweep, one line: ${lines.join("\n")}`);
        assert.equal(JSON.parse(lines[0]).count, N);

        // The sweep's removals are followed by a compaction (none of the records live): the
        // record topic then holds nothing of theirs, the catalog no row.
        await waitFor(() => gw2.view.storedSessionCompactions > 0, 10_000, "compacted");
        await gw2.view.storedSessionsIdle();
        for (let i = 0; i < N; i++) {
          const row = await gw2.view.log.getOffset(sessionConsumer(`a-${i}`), triple);
          assert.equal(row, null, `a-${i}'s position is deleted`);
        }
        assert.equal(await catalogRows(`${dir}/gateway.db`), 0, "no consumer-offset row of theirs");
        const records = gw2.view.log.poll(RECORD_TOPIC, 0, 10 * N);
        assert.deepEqual(await records, [], "no record and no tombstone of theirs");
        const back = await connectStored(gw2.port, "a-5");
        assert.deepEqual([back.present, back.code], [0, 0], "a returning id: session present 0");
        back.c.close();
      } finally {
        await gw2.stop();
      }
    } finally {
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});
