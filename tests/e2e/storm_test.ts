/**
 * A reconnect storm: thousands of clients connect at once (as after a site-wide network
 * blip); every one gets CONNACK 0 and the gateway keeps serving.
 */
import assert from "node:assert/strict";
import { connectPacket, connectRaw, pingBarrier, startGateway } from "../helpers/gateway.ts";

const CLIENTS = Number(Deno.env.get("STORM_CLIENTS") ?? 2000);

Deno.test({
  name: `reconnect storm: ${CLIENTS} clients connecting at once all get CONNACK 0`,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_GATEWAY_LOG_LEVEL: "warn" } });
    const conns: Deno.TcpConn[] = [];
    try {
      const results = await Promise.all(Array.from({ length: CLIENTS }, async (_, i) => {
        const c = await Deno.connect({ hostname: "127.0.0.1", port: gw.port });
        conns.push(c);
        await c.write(connectPacket(`storm-${i}`));
        const buf = new Uint8Array(4);
        let got = 0;
        while (got < 4) {
          const n = await c.read(buf.subarray(got));
          if (n === null) return -1;
          got += n;
        }
        return buf[3];
      }));
      assert.equal(results.filter((r) => r === 0).length, CLIENTS);
      assert.equal(gw.view.connected, CLIENTS);
      const witness = await connectRaw(gw.port, "witness");
      assert.deepEqual(await pingBarrier(witness), []);
      witness.close();
    } finally {
      for (const c of conns) {
        try {
          c.close();
        } catch { /* closed */ }
      }
      await gw.stop();
    }
  },
});
