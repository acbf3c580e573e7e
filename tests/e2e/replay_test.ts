/**
 * Replay from the log (issue 18, DESIGN §4 "Replay"): a 3.1.1 filter `$replay/<from>/<filter>`
 * starts in the log's past (earliest, or a time), delivers under the prefixed topic so client
 * libraries route it by that filter, is bounded by `limits.max_replay_messages`, then goes live.
 */
import assert from "node:assert/strict";
import { connectRaw, HAS_MOSQUITTO_CLIENTS, run, startGateway } from "../helpers/gateway.ts";
import {
  counter,
  opts,
  publishAll,
  publishesBefore,
  receive,
  subscribe,
} from "./_subscribe_helpers.ts";

const ROOM42 = "building/north/room/42/temp";

Deno.test({
  name: "$replay/earliest/<topic> delivers messages appended before the subscription existed, " +
    "under the prefixed topic, then live ones",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const pub = await connectRaw(gw.port, "pub");
      await publishAll(pub, [[ROOM42, "old-1"], [ROOM42, "old-2"], ["sensors/s/data", "other"]]);
      const c = await connectRaw(gw.port, "replayer");
      const filter = `$replay/earliest/${ROOM42}`;
      assert.deepEqual(await subscribe(c, [[filter, 1]]), [1]);
      const old = await receive(c, 2);
      assert.deepEqual(old.map((m) => [m.topic, m.payload, m.qos]), [
        [`$replay/earliest/${ROOM42}`, "old-1", 1],
        [`$replay/earliest/${ROOM42}`, "old-2", 1],
      ]);
      await publishAll(pub, [[ROOM42, "new"]], 10);
      const live = await receive(c, 1);
      assert.deepEqual(live.map((m) => [m.topic, m.payload]), [[
        `$replay/earliest/${ROOM42}`,
        "new",
      ]]);
      assert.deepEqual(await publishesBefore(c), [], "each message once");
      c.close();
      pub.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "mosquitto_sub -t '$replay/earliest/building/+/room/#' replays a wildcard filter",
  ignore: !HAS_MOSQUITTO_CLIENTS,
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const pub = await connectRaw(gw.port, "pub");
      await publishAll(pub, [["building/a/room/1/t", "a"], ["building/b/room/2/t", "b"]]);
      const r = await run("mosquitto_sub", [
        ...["-h", "127.0.0.1", "-p", String(gw.port), "-q", "1", "-v"],
        ...["-t", "$replay/earliest/building/+/room/#", "-C", "2", "-W", "10"],
      ]);
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(r.stdout.trim().split("\n").sort(), [
        "$replay/earliest/building/a/room/1/t a",
        "$replay/earliest/building/b/room/2/t b",
      ]);
      pub.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "limits.max_replay_messages bounds a replay: the rest is skipped (counted), then live",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_LIMITS_MAX_REPLAY_MESSAGES: "3" } });
    try {
      const pub = await connectRaw(gw.port, "pub");
      const old: [string, string][] = Array.from({ length: 10 }, (_, i) => [ROOM42, `o${i}`]);
      await publishAll(pub, old);
      const c = await connectRaw(gw.port, "replayer");
      assert.deepEqual(await subscribe(c, [[`$replay/earliest/${ROOM42}`, 1]]), [1]);
      assert.deepEqual((await receive(c, 3)).map((m) => m.payload), ["o0", "o1", "o2"]);
      await publishAll(pub, [[ROOM42, "live"]], 20);
      assert.deepEqual((await receive(c, 1)).map((m) => m.payload), ["live"]);
      assert.deepEqual(await publishesBefore(c), []);
      assert.equal(counter(gw, "replay_skipped_messages_total"), 7);
      c.close();
      pub.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "$replay/time:<epoch ms>/ starts at the first message appended at or after that time; " +
    "a malformed start gets SUBACK 0x80",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const pub = await connectRaw(gw.port, "pub");
      await publishAll(pub, [[ROOM42, "before-1"], [ROOM42, "before-2"]]);
      await new Promise((r) => setTimeout(r, 5)); // the log's clock must move past them
      const t = Date.now();
      await new Promise((r) => setTimeout(r, 5)); // and past t before the next appends
      await publishAll(pub, [[ROOM42, "after-1"], [ROOM42, "after-2"]], 5);
      const c = await connectRaw(gw.port, "replayer");
      const iso = new Date(t).toISOString();
      assert.deepEqual(
        await subscribe(c, [[`$replay/time:${t}/${ROOM42}`, 1], [`$replay/time:${iso}/#`, 0], [
          "$replay/yesterday/x",
          0,
        ], ["$replay/earliest", 0]]),
        [1, 0, 0x80, 0x80],
      );
      const got = await receive(c, 4);
      const byTopic = (p: string) => got.filter((m) => m.topic.startsWith(p)).map((m) => m.payload);
      assert.deepEqual(byTopic(`$replay/time:${t}/`), ["after-1", "after-2"]);
      assert.deepEqual(byTopic(`$replay/time:${iso}/`), ["after-1", "after-2"]);
      c.close();
      pub.close();
    } finally {
      await gw.stop();
    }
  },
});
