/**
 * Smoke variant of the stalled-subscriber soak (tests/soak/stalled_subscribers.ts): 50
 * subscribers of which 5 stall, 15 s at 20 msg/s, against the gateway run as its own process.
 * Checks that the figures are produced, that the stalled clients are evicted and come back,
 * and that the readers kept up. RSS flatness is the long run's verdict, not this one's (15 s
 * is mostly warm-up); here only its figures must exist.
 *
 * @module
 */
import assert from "node:assert/strict";
import { report, runSoak } from "./stalled_subscribers.ts";

Deno.test({
  name: "soak smoke: 50 subscribers, 5 stalled, 15 s — readers keep up, stalled ones evicted",
  fn: async () => {
    const r = await runSoak({
      subscribers: 50,
      stalled: 5,
      seconds: 15,
      rate: 20,
      payload: 200,
      capKiB: 16, // small, so a stalled client is evicted within the 15 s
      timeoutMs: 2000,
      sampleSeconds: 1,
    });
    console.log(report(r));

    // Figures exist.
    assert.ok(r.samples.length >= 15, `samples: ${r.samples.length}`);
    assert.ok(r.samples.every((s) => s.rssBytes > 0));
    assert.equal(r.windows.length, 1);
    for (const v of [r.secondHalf.mean, r.secondHalf.slopePerMin, r.secondHalf.spreadFraction]) {
      assert.ok(Number.isFinite(v));
    }
    assert.equal(typeof r.rssFlat, "boolean");

    // Publishing held its rate; every reader kept up and got every acknowledged message.
    assert.ok(r.acked >= 0.9 * 20 * 15, `acked ${r.acked}`);
    assert.ok(r.publishRate >= 18, `publish rate ${r.publishRate}`);
    assert.ok(
      r.minReaderRate >= 0.9 * r.publishRate,
      `slowest reader ${r.minReaderRate}/s vs ${r.publishRate}/s`,
    );
    assert.equal(r.readersClosed, 0);
    assert.equal(r.readersIncomplete, 0);
    assert.ok(r.readersKeptUp);

    // The stalled ones were evicted and reconnected.
    assert.ok(r.evictions >= 1, `evictions ${r.evictions}`);
    assert.ok(r.stalledReconnects >= 1, `reconnects ${r.stalledReconnects}`);

    // The store under ./data is gone.
    const left = [...Deno.readDirSync(new URL("../../data/", import.meta.url))]
      .filter((e) => e.name.startsWith(`soak-${Deno.pid}-`));
    assert.deepEqual(left, []);
  },
});
