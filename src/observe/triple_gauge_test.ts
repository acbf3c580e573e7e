import assert from "node:assert/strict";
import { Metrics } from "./metrics.ts";
import { tripleGauge } from "./triple_gauge.ts";

Deno.test("tripleGauge() shows one series per item, labelled with its triple", () => {
  const m = new Metrics();
  let items = [
    { triple: { stream: "s", topic: "t", partition: 0 }, n: 3 },
    { triple: { stream: "s", topic: "t", partition: 2 }, n: 5 },
  ];
  tripleGauge(m, "demo_gauge", "Demo", () => items, (i) => i.n);
  const text = m.toPrometheus();
  assert.match(text, /^demo_gauge\{partition="0",stream="s",topic="t"\} 3$/m);
  assert.match(text, /^demo_gauge\{partition="2",stream="s",topic="t"\} 5$/m);
  items = [];
  assert.doesNotMatch(m.toPrometheus(), /^demo_gauge\{/m);
});
