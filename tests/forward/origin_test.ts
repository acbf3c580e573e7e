import assert from "node:assert/strict";
import { openTestStore, textMessage } from "../helpers/embedded_store.ts";
import { decodeEncoded } from "../../src/log/embedded/_batch.ts";
import {
  GATEWAY_HEADER,
  ORIGIN_HEADER,
  originOffset,
  originStamp,
} from "../../src/forward/origin.ts";
import { runWireBytes, SendEncoder } from "../../src/log/iggy/send_encoder.ts";
import { loadHashes } from "../../src/base/xxhash.ts";

await loadHashes();

Deno.test("the origin stamp adds the gateway and each message's origin to stored messages, keeping theirs, in both logs' encodings", async () => {
  await using store = await openTestStore();
  const b = store.backend;
  const a = { stream: "s", topic: "t", partition: 3 };
  await b.createTopic("s", "t", { partitions: 4 });
  // Offsets up to 1,000 (digits of every length up to 4); payloads and headers vary.
  for (let i = 0; i < 1001; i += 250) {
    const messages = Array.from(
      { length: 250 },
      (_, k) =>
        textMessage(`p${i + k}`, {
          "mqtt.topic": `a/${k % 7}`,
          "mqtt5.user.0.k": "v".repeat(1 + (k % 200)),
        }),
    );
    await b.append({ ...a, messages });
  }
  const stamp = originStamp("edge-ü-7", 3);
  const fixedIds = (out: Uint8Array) => out.fill(7);
  for (const from of [0, 7, 99, 998]) {
    const run = (await b.pollEncoded(a, from, 300, 1 << 20))!;
    const stamped = decodeEncoded({ ...run, stamp });
    const stored = decodeEncoded(run);
    assert.equal(stamped.length, run.count);
    stamped.forEach((m, i) => {
      assert.deepEqual(m.payload, stored[i].payload);
      const { [GATEWAY_HEADER]: gw, [ORIGIN_HEADER]: origin, ...rest } = Object.fromEntries(
        m.headers,
      );
      assert.deepEqual(rest, Object.fromEntries(stored[i].headers));
      assert.equal(gw, "edge-ü-7");
      assert.equal(origin, `3/${from + i}`);
      assert.equal(originOffset(m.headers, "edge-ü-7", 3), from + i);
      assert.equal(originOffset(m.headers, "edge-ü-7", 2), null, "another partition's");
      assert.equal(originOffset(m.headers, "edge-8", 3), null, "another gateway's");
    });
    // Iggy's frames of the stamped run are those of the messages decoded with their stamp.
    const encoder = new SendEncoder(fixedIds);
    const exact = runWireBytes({ ...run, stamp });
    const framed = encoder.encode("s", "t", 3, [{ ...run, stamp }], 1, exact, run.count).slice();
    assert.deepEqual(framed, new SendEncoder(fixedIds).encode("s", "t", 3, stamped, 1));
  }
});
