/**
 * The MQTT 5 will delay: bounded by the session's end and by `mqtt5.max_will_delay_s`; a
 * delayed will is not sent when the client id comes back first, and goes out at a stop.
 */
import assert from "node:assert/strict";
import { type HeldWill, type WillContext, willDelayMs, WillPublisher } from "./will.ts";

const will = (willDelay?: number): HeldWill => ({
  topic: "t",
  payload: new Uint8Array([1]),
  qos: 0,
  retain: false,
  ...(willDelay === undefined ? {} : { properties: { willDelay } }),
});

Deno.test("willDelayMs() is the smallest of the will delay, the session expiry and the bound", () => {
  assert.equal(willDelayMs(will(), 100, 300), 0); // no delay asked (3.1.1 or none)
  assert.equal(willDelayMs(will(30), 0, 300), 0); // the session ends with the connection
  assert.equal(willDelayMs(will(30), undefined, 300), 0); // 3.1.1
  assert.equal(willDelayMs(will(30), 100, 300), 30_000);
  assert.equal(willDelayMs(will(30), 10, 300), 10_000); // the session ends first
  assert.equal(willDelayMs(will(9999), 9999, 300), 300_000); // mqtt5.max_will_delay_s
});

/** Services a will needs, recording what publishing it did (it is denied: no backend call). */
function context(outcomes: string[]): WillContext {
  return {
    preparer: { prepare: () => ({ kind: "denied", reason: "test" }) },
    metrics: { outcome: { denied: { inc: () => outcomes.push("denied") } } },
    logger: { limited: () => {} },
  } as unknown as WillContext;
}

Deno.test("WillPublisher: a delayed will is dropped when its client id reconnects, and sent at a stop", async () => {
  const outcomes: string[] = [];
  const ctx = context(outcomes);
  const wills = new WillPublisher();
  const principal = { username: "", permissions: {} } as never;
  wills.publish(ctx, will(60), principal, "dev-1", 60_000);
  assert.equal(wills.delayed, 1);
  wills.cancel("dev-1"); // a new connection with the same client id
  assert.equal(wills.delayed, 0);
  wills.publish(ctx, will(60), principal, "dev-2", 60_000);
  assert.deepEqual(outcomes, []); // not yet
  await wills.idle(); // the gateway stops: the session ends, the will goes out
  assert.equal(wills.delayed, 0);
  assert.deepEqual(outcomes, ["denied"]);
});
