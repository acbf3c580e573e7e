/**
 * A caught-up forward lane waits for the local log to say its partition grew: it does not look
 * at the log once per linger while nothing is appended, and a new message still goes at once.
 */
import assert from "node:assert/strict";
import { Forwarder } from "../../src/forward/forwarder.ts";
import type { EmbeddedBackend } from "../../src/log/embedded/mod.ts";
import { Logger } from "../../src/observe/logger.ts";
import { openTestStore, textMessage } from "../helpers/embedded_store.ts";
import { testForwarderOptions } from "../helpers/forward.ts";
import { waitFor } from "../helpers/wait.ts";

const A = { stream: "plant", topic: "readings", partition: 0 };
const LINGER_MS = 1;

/** `log` with its `partitionBytes` calls (a lane's look at the local log) counted. */
function counted(log: EmbeddedBackend): { log: EmbeddedBackend; looks: () => number } {
  let looks = 0;
  const proxy = new Proxy(log, {
    get(t, p) {
      const v = Reflect.get(t, p, t);
      if (typeof v !== "function") return v;
      if (p === "partitionBytes") looks++;
      return v.bind(t);
    },
  });
  return { log: proxy, looks: () => looks };
}

Deno.test("a caught-up lane waits for the local log to grow, not a timer; a new message goes", async () => {
  await using local = await openTestStore();
  await using upstream = await openTestStore();
  await local.backend.createTopic(A.stream, A.topic, { partitions: 1 });
  await local.backend.append({ ...A, messages: [textMessage("first")] });
  const { log, looks } = counted(local.backend);
  const options = testForwarderOptions({ lingerMs: LINGER_MS });
  const fw = new Forwarder(
    log,
    () => Promise.resolve(upstream.backend),
    options,
    new Logger("error"),
  );
  try {
    await fw.start();
    await waitFor(async () => await upstream.backend.nextOffset(A).catch(() => 0) === 1, 5_000);
    await waitFor(() => fw.status().lagMessages === 0, 5_000, "caught up");
    const before = looks();
    // Time itself is under test: two hundred lingers pass with nothing appended.
    await new Promise((r) => setTimeout(r, 200 * LINGER_MS));
    assert.ok(looks() - before <= 1, `${looks() - before} looks at an idle partition`);
    await local.backend.append({ ...A, messages: [textMessage("second")] });
    await waitFor(async () => await upstream.backend.nextOffset(A) === 2, 5_000, "second sent");
    const [second] = await upstream.backend.poll(A, 1, 1);
    assert.equal(new TextDecoder().decode(second.payload), "second");
  } finally {
    await fw.stop();
  }
});
