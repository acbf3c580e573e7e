/**
 * What ends is seen: retention deleting messages a stored session had not read leaves a warn
 * line naming the topic and counts in `/metrics`; a client id two devices share (each CONNECT
 * taking it over from the other) leaves a warn line with the id and both peers.
 */
import assert from "node:assert/strict";
import { connectPacket, connectRaw, RawClient, startGateway, waitFor } from "../helpers/gateway.ts";
import { opts, publishAll, subscribe } from "./_subscribe_helpers.ts";

const TOPIC = "building/north/room/42/temp";

function parsed(logs: string[], msg: string): Record<string, unknown>[] {
  return logs.map((l) => JSON.parse(l)).filter((l) => l.msg === msg);
}

Deno.test({
  name: "retention by topic size deleting messages an offline stored session had not read logs " +
    "one warn line per pass (stream, topic, messages, bytes, unread_sessions) and counts them",
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: {
        IGGY_MQTT_LOG_RETENTION_MAX_TOPIC_BYTES: String(64 * 1024),
        IGGY_MQTT_LOG_RETENTION_INTERVAL_MS: "200",
      },
    });
    try {
      const pub = await connectRaw(gw.port, "pub");
      await publishAll(pub, [[TOPIC, "first"]]);
      const sub = await RawClient.connect(gw.port);
      await sub.send(connectPacket("away-1", { clean: false }));
      assert.equal((await sub.readPacket())?.[3], 0);
      assert.deepEqual(await subscribe(sub, [[TOPIC, 1]]), [1]);
      sub.close();
      await waitFor(() => gw.view.storedSession("away-1")?.offlineSinceMs != null, 5000, "off");
      // 200 KB in 20 appends while it is away: the 64 KiB bound deletes most of them.
      const kb = "x".repeat(1024);
      for (let i = 0; i < 20; i++) {
        const batch = Array.from({ length: 10 }, () => [TOPIC, kb] as [string, string]);
        await publishAll(pub, batch, 2 + i * 10);
      }
      pub.close();
      const msg = "Retention deleted messages that clients had not read";
      await waitFor(() => parsed(gw.logs, msg).length > 0, 10_000, "the retention line");
      const [line] = parsed(gw.logs, msg);
      assert.equal(line.level, "warn");
      const topics = line.topics as Record<string, unknown>[];
      const t = topics.find((x) => x.unread_sessions === 1)!;
      assert.ok(t !== undefined, JSON.stringify(line));
      assert.equal(typeof t.stream, "string");
      assert.equal(typeof t.topic, "string");
      assert.ok((t.messages as number) > 0 && (t.bytes as number) >= (t.messages as number) * 1024);
      const counted = gw.view.metrics.retentionDeletedMessages.get({ unread: "yes" });
      assert.ok(counted >= (t.messages as number), `counted ${counted}`);
      const metrics = await (await fetch(`http://127.0.0.1:${gw.httpPort}/metrics`)).text();
      assert.match(metrics, /log_retention_deleted_messages_total\{unread="yes"\} \d+/);
      assert.match(metrics, /log_retention_deleted_bytes_total\{unread="yes"\} \d+/);
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "a client id taken over again and again (two devices sharing it) logs one warn line " +
    "with the id and both peers' addresses",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const clients: RawClient[] = [];
      for (let i = 0; i < 6; i++) clients.push(await connectRaw(gw.port, "shared-id"));
      const msg = "Client id taken over again and again: two clients share it?";
      await waitFor(() => parsed(gw.logs, msg).length > 0, 5000, "the takeover line");
      const lines = parsed(gw.logs, msg);
      assert.equal(lines.length, 1, "once per id per window");
      assert.equal(lines[0].level, "warn");
      assert.equal(lines[0].client_id, "shared-id");
      const peers = [lines[0].previous_peer, lines[0].new_peer] as string[];
      // Both "devices" are on this host here: the same address twice (the port is not kept).
      for (const p of peers) assert.match(p, /127\.0\.0\.1/);
      assert.equal(gw.view.metrics.takeovers.get(), 5);
      for (const c of clients) c.close();
    } finally {
      await gw.stop();
    }
  },
});
