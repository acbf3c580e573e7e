import assert from "node:assert/strict";
import { decodeStoredOptions, encodeStoredOptions, keptOptions } from "./stored_options.ts";

Deno.test("stored MQTT 5 options survive a record round trip; none gives no record field", () => {
  const options = new Map([
    ["a/+", {
      noLocal: true,
      retainAsPublished: false,
      retainHandling: 2 as const,
      subscriptionId: 7,
    }],
    ["b/#", {
      noLocal: false,
      retainAsPublished: true,
      retainHandling: 0 as const,
      subscriptionId: 0,
    }],
  ]);
  const record = JSON.parse(JSON.stringify({ p: encodeStoredOptions(options) }));
  assert.deepEqual(decodeStoredOptions(record.p), options);
  assert.equal(encodeStoredOptions(undefined), undefined);
  assert.equal(encodeStoredOptions(new Map()), undefined);
  assert.equal(decodeStoredOptions(undefined), undefined);
});

Deno.test("decodeStoredOptions() skips malformed entries and clamps bad values", () => {
  const got = decodeStoredOptions([["ok", 1, 0, 9, 268_435_456], [3, 1, 1, 1, 1], "x", null]);
  assert.deepEqual(
    got,
    new Map([["ok", {
      noLocal: true,
      retainAsPublished: false,
      retainHandling: 0,
      subscriptionId: 0,
    }]]),
  );
  assert.equal(decodeStoredOptions([[1]]), undefined);
});

Deno.test("keptOptions() drops the SUBSCRIBE's user properties (iggy-from is not kept)", () => {
  const o = {
    noLocal: true,
    retainAsPublished: true,
    retainHandling: 1 as const,
    subscriptionId: 3,
    userProperties: [["iggy-from", "earliest"]] as const,
  };
  assert.deepEqual(keptOptions(o), {
    noLocal: true,
    retainAsPublished: true,
    retainHandling: 1,
    subscriptionId: 3,
  });
  assert.equal(keptOptions(undefined), undefined);
});
