import assert from "node:assert/strict";
import { openTestStore, textMessage } from "../../../tests/helpers/embedded_store.ts";
import { decodeEncoded } from "./_batch.ts";
import type { EncodedMessages, StoredMessage } from "../port.ts";

const A = { stream: "s", topic: "t", partition: 1 };

/** What poll() gives, reduced to what an encoded read must hold too. */
const plain = (ms: readonly StoredMessage[]) =>
  ms.map((m) => ({ payload: new TextDecoder().decode(m.payload), headers: [...m.headers] }));

const plainRun = (run: EncodedMessages) =>
  decodeEncoded(run).map((m) => ({
    payload: new TextDecoder().decode(m.payload),
    headers: [...m.headers],
  }));

for (const forward of [false, true]) {
  // Forward mode keeps the newest records in memory (`_tail_cache.ts`): reads come from there.
  const mode = forward ? "from the tail cache (forward mode)" : "from the file";
  Deno.test(`pollEncoded() holds what poll() holds, across stored batches, from any offset, within both bounds, ${mode}`, () =>
    encodedReads(forward));
}

async function encodedReads(forward: boolean) {
  const retention = { consumer: "c", whenFull: "refuse" } as const;
  await using store = await openTestStore(forward ? { forward: retention } : {});
  const b = store.backend;
  await b.createTopic("s", "t", { partitions: 2 });
  // Four appends: four stored batches of this partition, another partition's between them.
  for (let batch = 0; batch < 4; batch++) {
    const messages = Array.from(
      { length: 5 },
      (_, i) =>
        textMessage(`m${batch * 5 + i}`.padEnd(10 + i, "."), {
          "mqtt.topic": `a/${batch}`,
          "mqtt.qos": "1",
          "mqtt5.user.0.ü": "ß",
        }),
    );
    await b.append({ ...A, messages });
    await b.append({ ...A, partition: 0, messages: [textMessage("other")] });
  }
  for (const from of [0, 3, 5, 12, 19]) {
    for (const limit of [1, 4, 7, 100]) {
      const run = (await b.pollEncoded(A, from, limit, 1 << 20))!;
      const expected = await b.poll(A, from, limit);
      assert.equal(run.count, expected.length, `from ${from} limit ${limit}`);
      assert.equal(run.firstOffset, from);
      assert.equal(run.firstTimestampMicros, expected[0].timestampMicros);
      assert.deepEqual(plainRun(run), plain(expected));
      assert.equal(run.payloadBytes, expected.reduce((n, m) => n + m.payload.length, 0));
    }
  }
  // The byte bound: stops before the payloads pass it, but the first always comes.
  const bounded = (await b.pollEncoded(A, 0, 100, 35))!;
  assert.deepEqual(bounded.count, 3, "10 + 11 + 12 bytes fit in 35, a fourth (13) does not");
  assert.equal((await b.pollEncoded(A, 0, 100, 1))!.count, 1);
  assert.equal(await b.pollEncoded(A, 20, 100, 1 << 20), null, "nothing past the end");
  assert.equal(await b.pollEncoded({ ...A, partition: 0 }, 4, 10, 1 << 20), null);
}

Deno.test("appendEncoded() stores what it is given as append() would", async () => {
  await using from = await openTestStore();
  await using to = await openTestStore();
  await from.backend.createTopic("s", "t", { partitions: 2 });
  await to.backend.createTopic("s", "t", { partitions: 2 });
  const messages = [textMessage("one", { "mqtt.topic": "x" }), textMessage("two")];
  await from.backend.append({ ...A, messages });
  const run = (await from.backend.pollEncoded(A, 0, 10, 1 << 20))!;
  assert.deepEqual(await to.backend.appendEncoded({ ...A, messages: run }), { baseOffset: 0 });
  assert.deepEqual(
    plain(await to.backend.poll(A, 0, 10)),
    plain(await from.backend.poll(A, 0, 10)),
  );
});
