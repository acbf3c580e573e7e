import assert from "node:assert/strict";
import { coalesced } from "./coalesced.ts";

Deno.test("coalesced() runs one job at a time; callers during a run share the next one", async () => {
  let runs = 0;
  const gates: PromiseWithResolvers<number>[] = [];
  const job = coalesced(() => {
    runs++;
    const g = Promise.withResolvers<number>();
    gates.push(g);
    return g.promise;
  });
  const first = job();
  const later = [job(), job(), job()];
  assert.equal(runs, 1, "no second run while the first runs");
  gates[0].resolve(1);
  assert.equal(await first, 1);
  await Promise.resolve();
  assert.equal(runs, 2, "the next run started for the latecomers");
  gates[1].resolve(2);
  assert.deepEqual(await Promise.all(later), [2, 2, 2]);
  await Promise.resolve();
  assert.equal(runs, 2, "nobody waited: no third run");
  const again = job();
  assert.equal(runs, 3);
  gates[2].resolve(3);
  assert.equal(await again, 3);
});

Deno.test("coalesced() passes a rejection to that run's callers and still runs the next", async () => {
  let runs = 0;
  const job = coalesced(() =>
    ++runs === 1 ? Promise.reject(new Error("down")) : Promise.resolve(runs)
  );
  const first = job();
  const second = job();
  await assert.rejects(first, /down/);
  assert.equal(await second, 2);
});
