/**
 * A wildcard subscription that ends while it is joining a new target (issue 18 review): with a
 * backend that confirms appends without an offset (as Iggy 0.9) and a slow `nextOffset`, the
 * join waits, and a subscription gone by then must not take (and keep) the new reader.
 */
import assert from "node:assert/strict";
import { connectRaw, startGateway, testEnv, waitFor } from "../helpers/gateway.ts";
import { opts, publishAll, rawSubscriber, unsubscribePacket } from "./_subscribe_helpers.ts";
import { createBackend } from "../../src/log/create.ts";
import { loadConfig } from "../../src/config/load.ts";

Deno.test({
  name: "a wildcard subscription gone during a late join does not keep the new target's reader",
  ...opts,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "wildcard-join-" });
    const real = await createBackend(loadConfig({ text: "", source: "t.toml", env: testEnv(dir) }));
    let slow = false;
    let asked = 0;
    let answered = 0;
    // The late join's nextOffset waits here until the subscription is gone.
    const gate = Promise.withResolvers<void>();
    const backend = new Proxy(real, {
      get(t, p) {
        const v = Reflect.get(t, p, t);
        if (typeof v !== "function") return v;
        if (p === "append") {
          return async (req: Record<string, unknown>) => ({
            ...(await v.call(t, { ...req, onCommitted: undefined })),
            baseOffset: null,
          });
        }
        if (p === "nextOffset") {
          return async (...a: unknown[]) => {
            if (!slow) return v.apply(t, a);
            asked++;
            await gate.promise;
            const next = await v.apply(t, a);
            answered++; // what the join continues with is synchronous from here
            return next;
          };
        }
        return v.bind(t);
      },
    });
    const gw = await startGateway({
      env: { IGGY_MQTT_EMBEDDED_PATH: `${dir}/gateway.db` },
      overrides: { backend },
    });
    try {
      const pub = await connectRaw(gw.port, "pub");
      await publishAll(pub, [["building/north/room/1/t", "creates building_north"]]);
      const sub = await rawSubscriber(gw.port, "s", [["building/+/room/#", 1]]);
      slow = true;
      await publishAll(pub, [["building/south/room/1/t", "creates building_south"]]);
      await waitFor(() => asked > 0, 5000, "the late join's nextOffset");
      await sub.send(unsubscribePacket(2, ["building/+/room/#"]));
      await sub.readPacket();
      gate.resolve();
      await waitFor(() => answered === asked, 5000, "the join's await to be over");
      const held = gw.view.readers()
        .filter((r) => r.triple.stream === "building_south" && r.subscribers > 0);
      assert.deepEqual(held, []);
      sub.close();
      pub.close();
    } finally {
      await gw.stop();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});
