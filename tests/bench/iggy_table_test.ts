import assert from "node:assert/strict";
import { IGGY_FIGURES, renderIggyTable, sendFigures } from "./_iggy.ts";
import { figureRows } from "./_report.ts";

Deno.test("bench --backend=iggy: mean send time and messages per send come from two scrapes of the gateway's histograms", () => {
  assert.deepEqual(
    sendFigures(
      { seconds: 0.5, messages: 1_000, sends: 10 },
      { seconds: 2.5, messages: 201_000, sends: 1_010 },
    ),
    { ms: 2, messages: 200 },
  );
  // No sends in between, or no histogram (the embedded log): no figure, not a zero.
  const same = { seconds: 1, messages: 5, sends: 3 };
  assert.equal(sendFigures(same, same), undefined);
  assert.equal(sendFigures(null, null), undefined);
});

Deno.test("bench --backend=iggy: the send rows show each variant's figure and no ratio", () => {
  const load = { msgsPerSec: 100_000 };
  const results = {
    qos1: {
      gateway: load,
      iggy_fsync: { ...load, iggySend: { ms: 1.27, messages: 198.9 } },
      iggy_default: { ...load, iggySend: { ms: 0.46, messages: 87.4 } },
    },
  };
  const rows = figureRows(results, ["gateway", "iggy_fsync", "iggy_default"], IGGY_FIGURES);
  const table = renderIggyTable(rows);
  assert.match(table, /\| Iggy send, mean \(ms\), qos1 \| – \| 1\.3 \| 0\.5 \| – \| – \|/);
  assert.match(table, /\| messages per Iggy send, qos1 \| – \| 199 \| 87 \| – \| – \|/);
});
