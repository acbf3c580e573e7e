import assert from "node:assert/strict";
import {
  type MqttListener,
  PartialReloadError,
  reloadSecureListeners,
  type TlsMaterial,
} from "./mqtt_listener.ts";

const PAIR: TlsMaterial = { cert: "c", key: "k" };

function listener(kind: "tls" | "wss", fails: boolean, got: string[]): MqttListener {
  return {
    kind,
    layer: "node",
    hostname: "127.0.0.1",
    port: 1,
    close() {},
    reloadTls(m: TlsMaterial) {
      if (fails) return Promise.reject(new Error(`${kind} port taken`));
      got.push(`${kind}:${m.cert}`);
      return Promise.resolve();
    },
  };
}

Deno.test("reloadSecureListeners() hands the pair to each listener in turn", async () => {
  const got: string[] = [];
  await reloadSecureListeners([listener("tls", false, got), listener("wss", false, got)], PAIR);
  assert.deepEqual(got, ["tls:c", "wss:c"]);
});

Deno.test("reloadSecureListeners() fails as it is when the first listener refuses the pair", async () => {
  const err = await reloadSecureListeners(
    [listener("tls", true, []), listener("wss", false, [])],
    PAIR,
  )
    .then(() => null, (e) => e);
  assert.ok(err instanceof Error && !(err instanceof PartialReloadError));
  assert.equal(err.message, "tls port taken");
});

Deno.test("reloadSecureListeners() names the listeners that swapped before one failed", async () => {
  const got: string[] = [];
  const err = await reloadSecureListeners(
    [listener("tls", false, got), listener("wss", true, got)],
    PAIR,
  )
    .then(() => null, (e) => e);
  assert.ok(err instanceof PartialReloadError);
  assert.deepEqual(err.swapped, ["tls"]);
  assert.equal(err.message, "wss port taken");
  assert.deepEqual(got, ["tls:c"]);
});
