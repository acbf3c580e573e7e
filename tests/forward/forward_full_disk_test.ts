/**
 * Forward mode on a disk smaller than `embedded.max_store_bytes` (a loop-mounted ext4,
 * tests/helpers/small_disk.ts): when the disk refuses the next segment, retention drops the
 * oldest segment once forwarded, as it does at the bound, so a store whose messages all reach the
 * upstream keeps accepting however small its disk. Skipped loudly without root.
 */
import assert from "node:assert/strict";
import { Forwarder } from "../../src/forward/forwarder.ts";
import { FORWARD_CONSUMER } from "../../src/forward/lane.ts";
import { DISK_RESERVE_BYTES, EmbeddedBackend } from "../../src/log/embedded/mod.ts";
import { BackendError } from "../../src/log/port.ts";
import { Logger } from "../../src/observe/logger.ts";
import { testForwarderOptions } from "../helpers/forward.ts";
import { openTestStore, sizedMessage } from "../helpers/embedded_store.ts";
import { FaultyUpstream } from "../helpers/faulty_upstream.ts";
import { mountSmallDisk, SMALL_DISK_NOTE, SMALL_DISK_SKIP } from "../helpers/small_disk.ts";
import { waitFor } from "../helpers/wait.ts";

const A = { stream: "s", topic: "t", partition: 0 };
const MESSAGE_BYTES = 16 * 1024;

Deno.test({
  name:
    `forward refuse on a small disk: a refused segment lets retention drop what is forwarded; every message goes in and up${SMALL_DISK_NOTE}`,
  ignore: SMALL_DISK_SKIP !== "",
  async fn() {
    await using disk = await mountSmallDisk(await Deno.makeTempDir({ prefix: "fwd_disk_" }), 64);
    const local = new EmbeddedBackend({
      path: `${disk.dir}/store.db`,
      users: [],
      maxStoreBytes: 8 * 1024 * 1024 * 1024, // far above the disk
      retentionMaxAgeSeconds: 0,
      retentionMaxTopicBytes: 0,
      retentionIntervalMs: 3_600_000,
      maxAppendBatch: 1000,
      writerThread: "in-process",
      forward: { consumer: FORWARD_CONSUMER, whenFull: "refuse" },
    });
    await local.open();
    await using upstream = await openTestStore();
    const fw = new Forwarder(
      local,
      () => new FaultyUpstream(upstream.backend).open(),
      testForwarderOptions({ gatewayId: "edge-1" }),
      new Logger("error"),
    );
    try {
      await local.createTopic("s", "t", { partitions: 1 });
      await fw.start();
      const room = 3 * 1024 * 1024;
      await disk.fill(DISK_RESERVE_BYTES + room);
      // Four times what the disk has room for, each message retried like a device until taken.
      const count = Math.ceil(4 * room / MESSAGE_BYTES);
      let refusals = 0;
      for (let i = 0; i < count; i++) {
        const deadline = Date.now() + 10_000;
        for (;;) {
          try {
            await local.append({ ...A, messages: [sizedMessage(MESSAGE_BYTES)] });
            break;
          } catch (e) {
            assert.ok(e instanceof BackendError && e.code === "full", String(e));
            assert.match(e.message, /The disk holding/);
            refusals++;
            if (Date.now() > deadline) throw new Error(`message ${i} refused for 10 s: ${e}`);
            await new Promise((r) => setTimeout(r, 20)); // a device's retry
          }
        }
      }
      assert.ok(refusals > 0, "the disk refused at least once: the test reached its edge");
      // Segments never take the reserve; the catalog (offsets, floors) writes into it a little.
      assert.ok(disk.free() > DISK_RESERVE_BYTES / 2, `${disk.free()} bytes free: reserve taken`);
      await waitFor(
        async () => (await upstream.backend.nextOffset(A).catch(() => 0)) >= count,
        10_000,
        "everything to reach the upstream",
      );
      assert.equal(fw.counters.dropped, 0, "nothing unforwarded was dropped");
    } finally {
      await fw.stop();
      await local.close();
    }
  },
});
