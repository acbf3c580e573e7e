/**
 * A QoS 1 delivery not PUBACKed within `limits.resend_after_ms` is resent on the same
 * connection with DUP set and the same packet id; a PUBACK stops the resends.
 */
import assert from "node:assert/strict";
import { connectRaw, publishPacket, startGateway, subscribePacket } from "../helpers/gateway.ts";

Deno.test({
  name: "resend: an un-PUBACKed QoS 1 delivery comes again with DUP and the same packet id",
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_LIMITS_RESEND_AFTER_MS: "300" } });
    try {
      const sub = await connectRaw(gw.port, "resend-sub");
      await sub.send(subscribePacket(1, [["sensors/r/data", 1]]));
      const suback = await sub.readPacket();
      assert.deepEqual([...suback!], [0x90, 3, 0, 1, 1]);
      const pub = await connectRaw(gw.port, "resend-pub");
      await pub.send(publishPacket("sensors/r/data", "again", 1, 9));
      assert.equal((await pub.readPacket())![0], 0x40);
      const first = (await sub.readPacket())!;
      assert.equal(first[0], 0x32, "QoS 1 PUBLISH without DUP");
      const again = (await sub.readPacket(3000))!;
      assert.equal(again[0], 0x3a, "QoS 1 PUBLISH with DUP");
      assert.deepEqual([...again.slice(1)], [...first.slice(1)], "same packet id, topic, payload");
      assert.ok(gw.view.metrics.resent.get() >= 1);
      // PUBACK it: no further resends. Real time: three resend intervals (300 ms) pass without one.
      const idOffset = 2 + 2 + "sensors/r/data".length;
      await sub.send([0x40, 2, again[idOffset], again[idOffset + 1]]);
      assert.equal(await sub.readPacket(900), null, "no resend after PUBACK");
      sub.close();
      pub.close();
    } finally {
      await gw.stop();
    }
  },
});
