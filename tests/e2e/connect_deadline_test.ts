/**
 * The connect deadline over real sockets: `limits.connect_timeout_ms` runs from accept to a
 * complete CONNECT, whatever arrives meanwhile (slowloris), over TCP and TLS (the handshake
 * included).
 */
import assert from "node:assert/strict";
import { connectPacket, RawClient, startGateway } from "../helpers/gateway.ts";

const opts = {};
const TIMEOUT_MS = 2500;
const FIX = new URL("../fixtures/tls/", import.meta.url).pathname;

/** Writes `bytes` one per second until the peer closes; returns ms from connect to close. */
async function trickle(port: number, bytes: Uint8Array): Promise<{ ms: number; sent: number }> {
  const t0 = Date.now();
  const c = await RawClient.connect(port);
  let sent = 0;
  try {
    for (const b of bytes) {
      try {
        await c.send([b]);
      } catch {
        break; // reset by the gateway
      }
      sent++;
      if (await c.closedByPeer(1000)) return { ms: Date.now() - t0, sent };
    }
    return { ms: Infinity, sent };
  } finally {
    c.close();
  }
}

for (const tls of [false, true]) {
  Deno.test({
    name: `connect_timeout_ms: a CONNECT trickled at 1 byte/s is closed at the deadline (${
      tls ? "TLS, during the handshake" : "TCP"
    })`,
    ...opts,
    async fn() {
      const env: Record<string, string> = { IGGY_MQTT_LIMITS_CONNECT_TIMEOUT_MS: `${TIMEOUT_MS}` };
      if (tls) {
        Object.assign(env, {
          IGGY_MQTT_LISTENERS_TCP: "",
          IGGY_MQTT_LISTENERS_TLS: "127.0.0.1:0",
          IGGY_MQTT_LISTENERS_TLS_CERT_FILE: `${FIX}server.crt`,
          IGGY_MQTT_LISTENERS_TLS_KEY_FILE: `${FIX}server.key`,
        });
      }
      const gw = await startGateway({ env });
      try {
        // Far more bytes than the deadline lets through at one per second: a CONNECT, or for
        // TLS the start of a ClientHello (a record of 256 bytes announced), so the handshake
        // is in progress and never completes.
        const bytes = tls
          ? new Uint8Array([0x16, 0x03, 0x01, 0x01, 0x00, 0x01, 0x00, 0x00, 0xfc, 0x03, 0x03, 7, 7])
          : connectPacket("slow-client-" + "x".repeat(20));
        const { ms, sent } = await trickle(gw.port, bytes);
        assert.ok(ms !== Infinity, `still open after ${sent} bytes`);
        // The deadline wheel has a 250 ms resolution; the loop checks once per second.
        assert.ok(ms >= TIMEOUT_MS - 100, `closed before the deadline: ${ms} ms`);
        assert.ok(ms <= TIMEOUT_MS + 2000, `closed ${ms} ms after accept, deadline ${TIMEOUT_MS}`);
        assert.ok(sent <= 5, `${sent} bytes went in before the close`);
        assert.equal(gw.view.metrics.keepAliveExpired.get(), 1);
      } finally {
        await gw.stop();
      }
    },
  });
}

Deno.test({
  name: "connect_timeout_ms: after a CONNECT in time, keep-alive takes over the deadline",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_LIMITS_CONNECT_TIMEOUT_MS: "1000" } });
    try {
      const c = await RawClient.connect(gw.port);
      await c.send(connectPacket("in-time", { keepAlive: 60 }));
      assert.deepEqual([...(await c.readPacket())!], [0x20, 2, 0, 0]);
      // Real time: twice the 1 s connect deadline passes without a close.
      assert.equal(await c.closedByPeer(2000), false, "closed although CONNECT came in time");
      c.close();
    } finally {
      await gw.stop();
    }
  },
});
