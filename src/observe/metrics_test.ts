import assert from "node:assert/strict";
import { Metrics } from "./metrics.ts";

Deno.test("Counter: no labels and labels count apart, under the keys /metrics prints", () => {
  const c = new Metrics().counter("test_total", "a test counter");
  c.inc({}, 2);
  c.inc();
  c.inc({ b: "2", a: 'x"y' });
  c.inc({ a: 'x"y', b: "2" }, 4);
  assert.equal(c.get(), 3);
  assert.equal(c.get({}), 3);
  assert.equal(c.get({ b: "2", a: 'x"y' }), 5);
  assert.deepEqual([...c.values.keys()], ["", 'a="x\\"y",b="2"']);
  const bound = c.child({});
  bound.inc(10);
  assert.equal(c.get(), 13);
});
