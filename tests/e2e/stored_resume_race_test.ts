/**
 * Stored-session resumes racing other events (issue 18 review): the embedded backend is
 * wrapped so `getOffset` takes tens of milliseconds, which opens the windows a slow Iggy opens.
 */
import assert from "node:assert/strict";
import {
  connectPacket,
  connectRaw,
  RawClient,
  startGateway,
  testEnv,
  waitFor,
} from "../helpers/gateway.ts";
import { opts, publishAll, receive, subscribe } from "./_subscribe_helpers.ts";
import { createBackend } from "../../src/log/create.ts";
import { loadConfig } from "../../src/config/load.ts";
import type { LogBackend } from "../../src/log/port.ts";
import { sessionConsumer } from "../../src/session/stored_sessions.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** How long `getOffset` takes (0: not delayed), and how many delayed calls began. */
interface Delay {
  ms: number;
  calls: number;
}

/** The embedded backend, with `getOffset` delayed by `delay.ms` (0: not delayed). */
async function slowBackend(dir: string, delay: Delay): Promise<LogBackend> {
  const env = testEnv(dir);
  const real = await createBackend(loadConfig({ text: "", source: "t.toml", env }));
  return new Proxy(real, {
    get(t, p) {
      const v = Reflect.get(t, p, t);
      if (typeof v !== "function") return v;
      if (p !== "getOffset") return v.bind(t);
      return async (...a: unknown[]) => {
        if (delay.ms > 0) {
          delay.calls++;
          await sleep(delay.ms); // the slow store: a duration, not a wait for an event
        }
        return v.apply(t, a);
      };
    },
  });
}

async function withGateway(
  delay: Delay,
  fn: (gw: Awaited<ReturnType<typeof startGateway>>) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "resume-race-" });
  const backend = await slowBackend(dir, delay);
  const gw = await startGateway({
    env: { IGGY_MQTT_EMBEDDED_PATH: `${dir}/gateway.db` },
    overrides: { backend },
  });
  try {
    await fn(gw);
  } finally {
    await gw.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

Deno.test({
  name: "a takeover in the middle of a resume keeps every stored subscription",
  ...opts,
  async fn() {
    const delay = { ms: 0, calls: 0 };
    await withGateway(delay, async (gw) => {
      const N = 10;
      const topics = Array.from({ length: N }, (_, i) => `building/b${i}/room/1/t`);
      const pub = await connectRaw(gw.port, "pub");
      await publishAll(pub, topics.map((t) => [t, "x"] as [string, string]));
      const c = await RawClient.connect(gw.port);
      await c.send(connectPacket("dev", { clean: false }));
      await c.readPacket();
      await subscribe(c, topics.map((t) => [t, 1] as [string, number]));
      c.close();
      await waitFor(() => gw.view.storedSession("dev")?.offlineSinceMs != null, 5000, "off");
      delay.ms = 20;
      const a = await RawClient.connect(gw.port);
      await a.send(connectPacket("dev", { clean: false }));
      await a.readPacket();
      await waitFor(() => delay.calls >= 3, 5000, "a few filters into its resume");
      const b = await RawClient.connect(gw.port);
      await b.send(connectPacket("dev", { clean: false }));
      await b.readPacket();
      await waitFor(
        () => gw.view.routedTopics().length >= N,
        5000,
        "the second connection's resume",
      );
      assert.equal(gw.view.storedSession("dev")!.subscriptions.size, N);
      assert.equal(gw.logs.filter((l) => l.includes("not restored")).length, 0);
      a.close();
      b.close();
      pub.close();
    });
  },
});

Deno.test({
  name: "a resume with live traffic on its triples loses nothing",
  ...opts,
  async fn() {
    const delay = { ms: 0, calls: 0 };
    await withGateway(delay, async (gw) => {
      const pub = await connectRaw(gw.port, "pub");
      await publishAll(pub, [
        ["building/north/room/42/temp", "x"],
        ...Array.from(
          { length: 9 },
          (_, k) => [`building/north/room/${k}/t`, "x"] as [string, string],
        ),
      ]);
      // Another client keeps the shared readers running while "dev" is away.
      const other = await RawClient.connect(gw.port);
      await other.send(connectPacket("other", { clean: true }));
      await other.readPacket();
      await subscribe(other, [["building/#", 0]]);
      const c = await RawClient.connect(gw.port);
      await c.send(connectPacket("dev", { clean: false }));
      await c.readPacket();
      await subscribe(c, [["building/north/room/42/temp", 1], ["building/+/room/#", 1]]);
      const dev = sessionConsumer("dev");
      await waitFor(
        async () => {
          const readers = gw.view.readers()
            .filter((r) => r.triple.stream === "building_north");
          if (readers.length === 0) return false;
          for (const r of readers) {
            const stored = await gw.view.log.getOffset(dev, r.triple);
            if (r.position > 0 && stored !== r.position - 1) return false;
          }
          return true;
        },
        5000,
        "its positions stored at the shared readers'",
      );
      c.close();
      await waitFor(() => gw.view.storedSession("dev")?.offlineSinceMs != null, 5000, "off");
      delay.ms = 30;
      const a = await RawClient.connect(gw.port);
      await a.send(connectPacket("dev", { clean: false }));
      await waitFor(() => delay.calls >= 1, 5000, "its resume under way");
      let n = 0;
      const until = Date.now() + 600;
      while (Date.now() < until) {
        await publishAll(pub, [[`building/north/room/${n % 9}/t`, `w${n}`]], 1);
        n++;
        await sleep(3); // pacing: live traffic spread over the whole 600 ms window
      }
      const got: { payload: string }[] = [];
      for (;;) {
        try {
          got.push(
            ...(await receive(a, 1, { timeoutMs: 1500 })) as unknown as { payload: string }[],
          );
        } catch {
          break;
        }
      }
      const live = got.map((m) => m.payload).filter((p) => p.startsWith("w"));
      const missing = Array.from({ length: n }, (_, i) => `w${i}`).filter((p) => !live.includes(p));
      assert.deepEqual(missing, []);
      assert.equal(live.length, n, "one copy each, even with two overlapping filters");
      a.close();
      pub.close();
      other.close();
    });
  },
});
