/**
 * The status page as a console, in headless Chromium, in the four states an operator must tell
 * apart at a glance: a fresh start, under load, the uplink down (forward mode), the store full.
 * Each state's full-page screenshot is written to `$STATUS_SCREENSHOTS` (a directory), when set,
 * for a person to look at, and the page's DOM is checked for what the
 * picture must say: the colours of the cards, rates on the first paint, drawn charts, the
 * clients table. The page is served by `consoleRoutes()` over the live test gateway with a
 * history ring sampled every 250 ms instead of 10 s, so the charts fill within seconds.
 * Ignored, saying SKIPPED in its name, when no browser is installed.
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
import { consoleRoutes } from "../../src/http/console_routes.ts";
import { History } from "../../src/observe/history.ts";
import { BROWSER, Browser } from "../helpers/browser.ts";
import { CLIENTS_LISTED } from "../../src/http/console_state.ts";

const SKIP_NOTE = BROWSER === null ? " [SKIPPED: chromium not installed]" : "";
const SAMPLE_MS = 250;

/** Where the screenshots go, when a person wants to look at them (else they are only checked). */
const SHOTS = Deno.env.get("STATUS_SCREENSHOTS") ?? null;
if (SHOTS !== null) await Deno.mkdir(SHOTS, { recursive: true });

/** The console over `t`'s gateway, its ring sampled every {@link SAMPLE_MS}. */
function serveConsole(t: TestGateway): { url: string; close(): Promise<void> } {
  const routes = consoleRoutes(t.gateway, { history: new History(3600, SAMPLE_MS) });
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (req) =>
      await routes.extra(req, new URL(req.url), "test") ?? new Response("nf", { status: 404 }),
  );
  return {
    url: `http://127.0.0.1:${server.addr.port}/`,
    close: async () => {
      routes.close();
      await server.shutdown();
    },
  };
}

/** Opens the page, waits for `ready(js)`, writes `<name>.png`, hands back the page's text. */
async function shoot(
  url: string,
  name: string,
  ready: (js: <T>(e: string) => Promise<T>) => Promise<boolean>,
): Promise<{ text(id: string): Promise<string>; cls(id: string): Promise<string>; png: number }> {
  const browser = await Browser.open(url);
  try {
    const js = <T>(e: string) => browser.evaluate<T>(e);
    await waitFor(() => ready(js), 15_000, `the page in state "${name}"`);
    const png = await browser.screenshotFullPage();
    assert.deepEqual([...png.subarray(1, 4)], [0x50, 0x4e, 0x47], "a PNG");
    if (SHOTS !== null) {
      await Deno.writeFile(`${SHOTS}/${name}.png`, png);
      console.log(`screenshot: ${SHOTS}/${name}.png (${png.length} bytes)`);
    }
    const texts = new Map<string, string>();
    const classes = new Map<string, string>();
    for (
      const id of [
        "state",
        "health",
        "reasons",
        "store-fill",
        "rate-acked",
        "rate-failed",
        "uplink",
      ]
    ) {
      texts.set(id, await js<string>(`document.getElementById("${id}").textContent`));
    }
    for (const id of ["health-card", "store-card", "uplink"]) {
      classes.set(id, await js<string>(`document.getElementById("${id}").className`));
    }
    texts.set(
      "charts",
      String(await js<number>(`document.querySelectorAll("#charts polyline").length`)),
    );
    texts.set("clients", await js<string>(`document.getElementById("clients").textContent`));
    return {
      text: (id) => Promise.resolve(texts.get(id) ?? ""),
      cls: (id) => Promise.resolve(classes.get(id) ?? ""),
      png: png.length,
    };
  } finally {
    await browser.close();
  }
}

/**
 * Publishes QoS 0 in a loop until stopped, a PINGREQ barrier every 8; a connection the gateway
 * closes (a failed append does) is opened again, as a device would.
 */
function keepFilling(port: number, topic: string, payload: string): { stop(): Promise<void> } {
  let running = true;
  const loop = (async () => {
    while (running) {
      let c: RawClient | null = null;
      try {
        c = await connectRaw(port, "filler");
        while (running) {
          for (let i = 0; i < 8; i++) await c.send(publishPacket(topic, payload, 0, 0));
          await pingBarrier(c, 10_000);
        }
      } catch {
        // Closed by the gateway: connect again, a little later.
        await new Promise((r) => setTimeout(r, 20));
      } finally {
        c?.close();
      }
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
    },
  };
}

/** Publishes QoS 1 in a loop until stopped. */
function keepPublishing(c: RawClient, topic: string, payload: string): { stop(): Promise<void> } {
  let running = true;
  let sent = 0;
  const loop = (async () => {
    while (running) {
      for (let i = 0; i < 20; i++) {
        await c.send(publishPacket(topic, payload, 1, (sent++ % 60000) + 1));
      }
      await pingBarrier(c, 10_000);
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
    },
  };
}

Deno.test(`status console: fresh start and under load, in headless chromium${SKIP_NOTE}`, {
  ignore: BROWSER === null,
}, async () => {
  const t = await startGateway({ env: { IGGY_MQTT_GATEWAY_DRAIN_TIMEOUT_MS: "1000" } });
  const page = serveConsole(t);
  const clients: RawClient[] = [];
  let load: { stop(): Promise<void> } | null = null;
  try {
    const fresh = await shoot(
      page.url,
      "1-fresh-start",
      async (js) => await js<string>(`document.getElementById("state").textContent`) === "ready",
    );
    assert.equal(await fresh.text("health"), "Working");
    assert.equal(await fresh.cls("health-card"), "card is-ok");
    assert.equal(await fresh.text("rate-failed"), "0.0", "a rate on the first paint");
    assert.match(await fresh.text("clients"), /no client connected/);

    const sub = await connectRaw(t.port, "console-sub");
    clients.push(sub);
    await sub.send(subscribePacket(1, [["sensors/+/data", 0]]));
    await pingBarrier(sub);
    const pub = await connectRaw(t.port, "console-pub");
    clients.push(pub);
    load = keepPublishing(pub, "sensors/s-1/data", "x".repeat(512));
    const loaded = await shoot(page.url, "2-under-load", async (js) => {
      const acked = await js<string>(`document.getElementById("rate-acked").textContent`) ?? "";
      const lines = await js<number>(
        `document.querySelectorAll("#charts polyline[points*=' ']").length`,
      );
      // The clients table follows its own refresh of the listing: wait for the publisher in it.
      const listed = await js<string>(`document.getElementById("clients").textContent`) ?? "";
      return Number(acked.replaceAll(",", "")) > 0 && lines >= 5 && listed.includes("console-pub");
    });
    assert.ok(Number((await loaded.text("rate-acked")).replaceAll(",", "")) > 0);
    assert.ok(Number(await loaded.text("charts")) >= 6, "six charts' lines drawn");
    assert.match(await loaded.text("clients"), /console-pub\(anonymous\)127\.0\.0\.1tcp3\.1\.1/);
    assert.ok(loaded.png > 30_000, `a page with content (${loaded.png} bytes)`);
  } finally {
    await load?.stop();
    for (const c of clients) c.close();
    await page.close();
    await t.stop();
  }
});

Deno.test(`status console: the uplink down is a red banner with what waits${SKIP_NOTE}`, {
  ignore: BROWSER === null,
}, async () => {
  const t = await startGateway({
    env: {
      IGGY_MQTT_GATEWAY_DRAIN_TIMEOUT_MS: "1000",
      IGGY_MQTT_FORWARD_ENABLED: "true",
      IGGY_MQTT_IGGY_ADDRESS: `127.0.0.1:${freePort()}`, // nothing listens there
      IGGY_MQTT_IGGY_PASSWORD: "iggy",
      IGGY_MQTT_IGGY_RECONNECT_MAX_MS: "100",
    },
  });
  const page = serveConsole(t);
  const pub = await connectRaw(t.port, "edge-device");
  try {
    for (let i = 1; i <= 200; i++) {
      await pub.send(publishPacket(`sensors/s-${i % 7}/data`, "y".repeat(1024), 1, i));
    }
    await pingBarrier(pub);
    const down = await shoot(
      page.url,
      "3-uplink-down",
      async (js) =>
        / 200 messages/.test(await js<string>(`document.getElementById("uplink").textContent`)),
    );
    assert.equal(await down.cls("uplink"), "banner bad");
    assert.match(
      await down.text("uplink"),
      /^Uplink DOWN since .+ · 200 messages \([\d.]+ KiB\) waiting/,
    );
    assert.equal(await down.text("state"), "ready · uplink down");
  } finally {
    pub.close();
    await page.close();
    await t.stop();
  }
});

Deno.test(
  `status console: a full store is a red card saying new messages are refused${SKIP_NOTE}`,
  {
    ignore: BROWSER === null,
  },
  async () => {
    const t = await startGateway({
      env: {
        IGGY_MQTT_GATEWAY_DRAIN_TIMEOUT_MS: "1000",
        IGGY_MQTT_EMBEDDED_MAX_STORE_BYTES: "1048576",
        IGGY_MQTT_LIMITS_MAX_PACKET_BYTES: "131072",
      },
    });
    const page = serveConsole(t);
    // 64 KiB QoS 0 messages, on and on: once the store is full each fails (the connection is
    // opened again when closed), so the store stays full while the page is looked at.
    const load = keepFilling(t.port, "sensors/big/data", "z".repeat(65536));
    try {
      await waitFor(
        () => t.view.metrics.publishes.get({ outcome: "failed" }) > 0,
        15_000,
        "the store to fill",
      );
      const full = await shoot(
        page.url,
        "4-store-full",
        async (js) =>
          /FULL/.test(await js<string>(`document.getElementById("store-fill").textContent`)),
      );
      assert.equal(await full.cls("store-card"), "card is-bad");
      assert.equal(await full.text("store-fill"), "FULL: new messages are refused");
      assert.equal(await full.cls("health-card"), "card is-bad");
      assert.equal(await full.text("health"), "NOT READY");
      assert.match(await full.text("reasons"), /The message log is full: max_store_bytes reached/);
    } finally {
      await load.stop();
      await page.close();
      await t.stop();
    }
  },
);

Deno.test("status.json stays bounded: at most CLIENTS_LISTED clients listed, every one counted", async () => {
  const t = await startGateway();
  const page = serveConsole(t);
  const clients: RawClient[] = [];
  try {
    for (let i = 0; i < CLIENTS_LISTED + 50; i++) clients.push(await connectRaw(t.port, `c-${i}`));
    const res = await fetch(`${page.url}status.json`);
    const text = await res.text();
    const s = JSON.parse(text);
    assert.equal(s.clients.total, CLIENTS_LISTED + 50);
    assert.equal(s.clients.listed.length, CLIENTS_LISTED);
    assert.deepEqual(s.clients.by_listener, { "tcp · MQTT 3.1.1": CLIENTS_LISTED + 50 });
    console.log(`status.json with ${CLIENTS_LISTED + 50} clients: ${text.length} bytes`);
    assert.ok(text.length < 100_000, `status.json ${text.length} bytes`);
    const html = await (await fetch(page.url)).text();
    console.log(`status page: ${html.length} bytes`);
    assert.ok(html.length < 40_000, `page ${html.length} bytes`);
  } finally {
    for (const c of clients) c.close();
    await page.close();
    await t.stop();
  }
});

Deno.test("the gateway's own /status.json carries the console's figures and measures the store soon after start", async () => {
  const t = await startGateway();
  try {
    const get = async () =>
      await (await fetch(`http://127.0.0.1:${t.httpPort}/status.json`)).json();
    // The scan at start ran before the store opened; the first request asks for another.
    await waitFor(async () => (await get()).store.records_bytes !== null, 5000, "a store scan");
    const s = await get();
    assert.equal(s.version, "0.1.0");
    assert.deepEqual(s.listeners.map((l: { name: string }) => l.name), ["tcp", "http"]);
    assert.equal(s.store.max_bytes, t.config.embedded.max_store_bytes);
    assert.equal(s.store.full, null);
    assert.equal(s.history.interval_ms, 10_000);
    assert.deepEqual(Object.keys(s.rates).sort(), [
      "acked",
      "appended",
      "deliveries",
      "denied",
      "failed",
      "rejected",
      "window_s",
    ]);
    assert.equal(s.clients.total, 0);
    assert.equal(s.stored_sessions.total, 0);
  } finally {
    await t.stop();
  }
});
