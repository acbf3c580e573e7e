/**
 * The status page in a real headless browser (Debian `chromium`; `google-chrome` on GitHub's
 * runners, or `$CHROMIUM`): a live gateway takes publishes while the browser loads the page,
 * and the rendered DOM must show the live figures (connections, per-second rates, reader lag
 * per triple, per-rule hits). The browser is driven over the DevTools protocol so the page
 * runs in real time (`--virtual-time-budget` compresses the 1 s polls into milliseconds, which
 * makes per-second rates meaningless). A screenshot is taken too, and written where
 * STATUS_SCREENSHOT says. Ignored, saying SKIPPED in its name, when no browser is installed.
 *
 * If `GET /` of the gateway's HTTP listener does not serve the page yet (route not wired into
 * `src/gateway.ts`), the test serves `handleStatusRoute()` over the same live gateway itself.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  connectRaw,
  freePort,
  pingBarrier,
  publishPacket,
  type RawClient,
  startGateway,
  subscribePacket,
  type TestGateway,
  waitFor,
} from "../helpers/gateway.ts";
import { handleStatusRoute } from "../../src/http/status_page.ts";
import { BROWSER, Browser } from "../helpers/browser.ts";
import { FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";

if (BROWSER === null) {
  console.warn(
    "WARNING: chromium not found; the status page browser tests are SKIPPED " +
      "(install Debian package chromium, or set CHROMIUM=/path/to/chrome).",
  );
}
const SKIP_NOTE = BROWSER === null ? " [SKIPPED: chromium not installed]" : "";

/** The page URL: the gateway's own `/` when wired, else a test server over the same gateway. */
async function pageUrl(t: TestGateway): Promise<{ url: string; close(): Promise<void> }> {
  const own = await fetch(`http://127.0.0.1:${t.httpPort}/`);
  const body = await own.text();
  if (own.ok && body.includes("Iggy MQTT Gateway")) {
    return { url: `http://127.0.0.1:${t.httpPort}/`, close: () => Promise.resolve() };
  }
  console.warn("NOTE: GET / is not wired into the gateway yet; serving handleStatusRoute() here.");
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    (req) => handleStatusRoute(new URL(req.url), t.gateway) ?? new Response("nf", { status: 404 }),
  );
  return { url: `http://127.0.0.1:${server.addr.port}/`, close: () => server.shutdown() };
}

/** Publishes QoS 1 in a loop until stopped; a PINGREQ barrier keeps the window small. */
function keepPublishing(c: RawClient): { stop(): Promise<number> } {
  let running = true;
  let sent = 0;
  const loop = (async () => {
    while (running) {
      for (let i = 0; i < 20; i++) {
        await c.send(publishPacket("sensors/s-1/data", `v${sent}`, 1, (sent % 60000) + 1));
        sent++;
      }
      await pingBarrier(c);
      // Real time: a steady trickle over the page's 1 s polls, not a flood.
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return sent;
    },
  };
}

Deno.test(
  `status page renders live figures in headless chromium${SKIP_NOTE}`,
  { ignore: BROWSER === null },
  async () => {
    const t = await startGateway({ env: { IGGY_MQTT_GATEWAY_DRAIN_TIMEOUT_MS: "1000" } });
    const clients: RawClient[] = [];
    let publisher: { stop(): Promise<number> } | null = null;
    const page = await pageUrl(t);
    try {
      // One subscriber (a shared reader appears), one publisher that keeps going.
      const sub = await connectRaw(t.port, "status-sub");
      clients.push(sub);
      await sub.send(subscribePacket(1, [["sensors/s-1/data", 1]]));
      await pingBarrier(sub);
      const pub = await connectRaw(t.port, "status-pub");
      clients.push(pub);
      await pub.send(publishPacket("unmapped/topic", "x", 1, 1)); // default rule
      await pingBarrier(pub);
      publisher = keepPublishing(pub);
      // The subscriber is being served (it answers nothing: QoS 1 copies stay unsettled up to
      // the window) and the publisher's messages are acknowledged.
      await waitFor(
        () =>
          t.view.readers().some((r) => r.unsettled > 0) &&
          t.view.metrics.publishes.get({ outcome: "acked" }) > 1,
        5000,
        "copies delivered to the subscriber and publishes acknowledged",
      );

      const browser = await Browser.open(page.url);
      try {
        // Real time: wait until two polls have given a rate (the page polls every second).
        const text = (id: string) =>
          browser.evaluate<string>(`document.getElementById(${JSON.stringify(id)}).textContent`);
        let acked = "";
        await waitFor(
          async () => {
            acked = await text("rate-acked");
            return /^[\d,.]+$/.test(acked) && Number(acked.replaceAll(",", "")) > 0;
          },
          10_000,
          "a rate of acknowledged publishes",
        ).catch(() => {}); // asserted below
        assert.ok(Number(acked.replaceAll(",", "")) > 0, `acked/s > 0, got "${acked}"`);
        assert.equal(await text("state"), "ready");
        assert.equal(await text("connections"), "2");
        assert.equal(await text("retained-topics"), "0");
        // The embedded backend's detail: its disk's free space against the store's reserve.
        assert.match(
          await text("gw"),
          /^gateway-1 · embedded backend \(the disk holding ".*" has \d+ bytes free \(reserve 4194304\)\)$/,
        );
        assert.equal(await text("rate-failed"), "0.0");
        const dom = await browser.evaluate<string>("document.documentElement.outerHTML");
        // Reader row for the subscribed triple, topic map rows with hit counts.
        assert.match(dom, /<td>sensors<\/td><td>sensor_data<\/td><td class="n">\d<\/td>/);
        assert.match(dom, /<td>sensor_\$1<\/td><td class="n">[1-9][\d,]*<\/td>/, "rule 2 hits");
        assert.match(
          dom,
          /<td>messages_default<\/td><td>\(balanced\)<\/td><td class="n">1<\/td>/,
          "default hits",
        );

        const png = await browser.screenshot();
        assert.deepEqual([...png.subarray(1, 4)], [0x50, 0x4e, 0x47], "a PNG");
        assert.ok(png.length > 10_000, `screenshot is not blank (${png.length} bytes)`);
        const shot = Deno.env.get("STATUS_SCREENSHOT");
        if (shot) await Deno.writeFile(shot, png);
      } finally {
        await browser.close();
      }
    } finally {
      await publisher?.stop();
      for (const c of clients) c.close();
      await page.close();
      await t.stop();
    }
  },
);

Deno.test(
  `status page shows a lost uplink as a red banner, then up again, in headless chromium${SKIP_NOTE}`,
  { ignore: BROWSER === null },
  async () => {
    const iggyPort = freePort();
    const t = await startGateway({
      env: {
        IGGY_MQTT_GATEWAY_DRAIN_TIMEOUT_MS: "1000",
        IGGY_MQTT_FORWARD_ENABLED: "true",
        IGGY_MQTT_IGGY_ADDRESS: `127.0.0.1:${iggyPort}`, // nothing there yet: down at start
        IGGY_MQTT_IGGY_PASSWORD: "iggy",
        IGGY_MQTT_IGGY_RECONNECT_MAX_MS: "100",
      },
    });
    const node = new FakeNode({ dialect: "0.11", store: new FakeStore() });
    const page = await pageUrl(t);
    const pub = await connectRaw(t.port, "status-pub");
    try {
      for (let i = 1; i <= 10; i++) {
        await pub.send(publishPacket("sensors/s-1/data", `v${i}`, 1, i));
      }
      await pingBarrier(pub);
      const browser = await Browser.open(page.url);
      try {
        const js = <T>(expression: string) => browser.evaluate<T>(expression);
        const banner = () => js<string>(`document.getElementById("uplink").textContent`);
        await waitFor(
          async () => / 10 messages/.test(await banner()),
          10_000,
          "the backlog in the banner",
        );
        assert.match(
          await banner(),
          /^Uplink DOWN since .+: .+ · 10 messages \([\d.]+ B\) waiting/,
        );
        assert.equal(await js<boolean>(`document.getElementById("uplink").hidden`), false);
        assert.equal(await js<string>(`document.getElementById("uplink").className`), "banner bad");
        // Red (--bad), not the muted grey of the header.
        const color = await js<string>(`getComputedStyle(document.getElementById("uplink")).color`);
        assert.equal(color, "rgb(180, 35, 24)");
        assert.equal(
          await js<string>(`document.getElementById("state").textContent`),
          "ready · uplink down",
        );
        node.listen(iggyPort);
        await waitFor(async () => /^Uplink up since /.test(await banner()), 10_000, "uplink up");
        await waitFor(
          async () =>
            await js<string>(`document.getElementById("uplink").className`) === "banner ok",
          10_000,
          "the banner green once what waited is forwarded",
        );
        assert.equal(await js<string>(`document.getElementById("state").textContent`), "ready");
      } finally {
        await browser.close();
      }
    } finally {
      pub.close();
      await page.close();
      await t.stop();
      await node.close();
    }
  },
);
