/**
 * A reset uplink, in both dialects: the fake Iggy behind a proxy that resets (RST) every
 * connection every 2.5 s (`tests/helpers/reset_proxy.ts`). An IggyBackend appending all along
 * notices each reset at once (no append waits anywhere near the request timeout), appends again
 * after each one, and every confirmed append is stored; no append fails and none is stored
 * twice: 0.12 resends under its producer stamp, 0.11 reads a cut send back and resends it only
 * when it is not there (`cut_send.ts`). And through a gateway: MQTT QoS 1 publishers keep
 * getting PUBACKs across resets.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { IggyBackend } from "../../src/log/iggy/mod.ts";
import { fakeIggyConfig, FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";
import { startGateway, waitFor } from "../helpers/gateway.ts";
import { startResetProxy } from "../helpers/reset_proxy.ts";

const auth = { patUsername: "", cacheTtlMs: 0 };
const REQUEST_TIMEOUT_MS = 5_000;
const RESET_EVERY_MS = 2_500;
const ROUNDS = 3;
const WORKERS = 4;

/** What the appending workers saw. */
interface Run {
  /** Payloads of the confirmed appends. */
  readonly confirmed: string[];
  readonly failures: unknown[];
  /** `performance.now()` of each timed reset, and of each confirmed append's start. */
  readonly resetAt: number[];
  readonly confirmedStarts: number[];
  slowestMs: number;
}

/** One worker: appends one message at a time to its partition until `stop`. */
async function worker(b: IggyBackend, w: number, run: Run, stop: () => boolean): Promise<void> {
  for (let n = 0; !stop(); n++) {
    const payload = `${w}:${n}`;
    const started = performance.now();
    try {
      await b.append({
        stream: "s",
        topic: "t",
        partition: w % 2,
        messages: [{ payload: new TextEncoder().encode(payload), headers: new Map() }],
      });
      run.confirmed.push(payload);
      run.confirmedStarts.push(started);
    } catch (e) {
      run.failures.push(e);
      await new Promise((r) => setTimeout(r, 1)); // a failed append lets the timers run
    }
    run.slowestMs = Math.max(run.slowestMs, performance.now() - started);
  }
}

/** An append that started after reset `i` and was confirmed. */
function appendedAfter(run: Run, i: number): boolean {
  return run.confirmedStarts.some((t) => t > run.resetAt[i]);
}

for (const dialect of ["0.12", "0.11"] as const) {
  Deno.test(`${dialect}: appends go on across a reset every 2.5 s; each reset is noticed at once`, async () => {
    const store = new FakeStore();
    const node = new FakeNode({ dialect, store });
    const run: Run = {
      confirmed: [],
      failures: [],
      resetAt: [],
      confirmedStarts: [],
      slowestMs: 0,
    };
    const proxy = await startResetProxy({
      target: node.listen(),
      everyMs: RESET_EVERY_MS,
      onReset: () => run.resetAt.push(performance.now()),
    });
    const config = fakeIggyConfig({
      address: proxy.address,
      protocol: dialect,
      pool_size: 2,
      request_timeout_ms: REQUEST_TIMEOUT_MS,
      reconnect_max_ms: 10_000,
    });
    const b = new IggyBackend(config, auth);
    let stopped = false;
    try {
      await b.open();
      await b.createTopic("s", "t", { partitions: 2 });
      const workers = Array.from({ length: WORKERS }, (_, w) => worker(b, w, run, () => stopped));
      // Barrier: three resets happened, and an append that started after the last one is in.
      await waitFor(
        () => run.resetAt.length >= ROUNDS && appendedAfter(run, ROUNDS - 1),
        ROUNDS * RESET_EVERY_MS + REQUEST_TIMEOUT_MS,
        "appends after the third reset",
      );
      stopped = true;
      await Promise.all(workers);
    } finally {
      stopped = true;
      await b.close();
      await proxy.close();
      await node.close();
    }

    assert.ok(proxy.resets >= ROUNDS, "the proxy reset the gateway's connections");
    for (let i = 0; i < ROUNDS; i++) assert.ok(appendedAfter(run, i), `appends after reset ${i}`);
    assert.ok(
      run.slowestMs < REQUEST_TIMEOUT_MS / 5,
      `the slowest append took ${run.slowestMs.toFixed(0)} ms: a reset went unnoticed`,
    );
    const stored = [0, 1].flatMap((p) => store.payloads("s", "t", p));
    const storedSet = new Set(stored);
    const lost = run.confirmed.filter((p) => !storedSet.has(p));
    assert.deepEqual(lost, [], "every confirmed append is stored");
    const duplicates = stored.length - storedSet.size;
    const { possibleDuplicates, resends, foundStored } = b.remote.resendCounters();
    assert.deepEqual(run.failures, [], "what a reset cut off is resolved: no append fails");
    assert.equal(duplicates, 0, "and each batch is stored once");
    assert.equal(possibleDuplicates, 0);
    if (dialect === "0.11") {
      // Only a send written before its cut needs the read-back; a reset may hit none.
      assert.ok((foundStored ?? 0) + resends <= proxy.resets * 2, `${foundStored}, ${resends}`);
      console.log(`0.11 cut sends: ${foundStored} found stored, ${resends} resent`);
    }
  });
}

for (const dialect of ["0.12", "0.11"] as const) {
  Deno.test(`gateway on fake Iggy ${dialect}: QoS 1 publishers get PUBACKs across uplink resets`, async () => {
    const node = new FakeNode({ dialect, store: new FakeStore() });
    const resetAt: number[] = [];
    const proxy = await startResetProxy({
      target: node.listen(),
      // Longer than a 0.12 long poll (a second), which a reset at every poll would always cut.
      everyMs: 1_500,
      onReset: () => resetAt.push(performance.now()),
    });
    const gw = await startGateway({
      env: {
        IGGY_MQTT_GATEWAY_BACKEND: "iggy",
        IGGY_MQTT_IGGY_ADDRESS: proxy.address,
        IGGY_MQTT_IGGY_PASSWORD: "iggy",
      },
    });
    const acks: number[] = [];
    let stopped = false;
    const clients: mqtt.MqttClient[] = [];
    try {
      for (let i = 0; i < 3; i++) {
        // A device whose connection the gateway closes (0.11: a send cut off) comes back.
        clients.push(
          await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
            clientId: `d${i}`,
            clean: false,
            reconnectPeriod: 20,
          }),
        );
      }
      // Not awaited at the end: a publish still in flight when its client is ended never settles.
      clients.forEach(async (c, i) => {
        for (let n = 0; !stopped; n++) {
          const started = performance.now();
          await c.publishAsync(`sensors/d${i}/data`, `${n}`, { qos: 1 }).then(
            () => acks.push(started),
            () => {},
          );
        }
      });
      await waitFor(
        () => resetAt.length >= ROUNDS && acks.some((t) => t > resetAt[ROUNDS - 1]),
        10_000,
        "PUBACKs for publishes after the third reset",
      );
      stopped = true;
      for (let i = 0; i < ROUNDS; i++) {
        assert.ok(acks.some((t) => t > resetAt[i]), `PUBACKs after reset ${i}`);
      }
    } finally {
      stopped = true;
      await Promise.all(clients.map((c) => c.endAsync(true)));
      await gw.stop();
      await proxy.close();
      await node.close();
    }
  });
}
