/**
 * The embedded store on a real small filesystem (a loop-mounted ext4, tests/helpers/small_disk.ts)
 * running out of space: refused appends write nothing, the reason names the disk, and freeing
 * space lets appends through again within about a second, without a reopen.
 */
import assert from "node:assert/strict";
import { EmbeddedBackend } from "./backend.ts";
import type { EmbeddedOptions } from "./options.ts";
import { BackendError } from "../port.ts";
import { DISK_RESERVE_BYTES, DISK_RETRY_MS, DiskRoom } from "./_disk_room.ts";
import {
  mountSmallDisk,
  SMALL_DISK_NOTE,
  SMALL_DISK_SKIP,
} from "../../../tests/helpers/small_disk.ts";
import { waitFor } from "../../../tests/helpers/wait.ts";

const address = { stream: "s", topic: "t", partition: 0 };
const MESSAGE = { payload: new Uint8Array(16 * 1024).fill(7), headers: new Map<string, string>() };

function options(dir: string): EmbeddedOptions {
  return {
    path: `${dir}/store.db`,
    users: [],
    maxStoreBytes: 8 * 1024 * 1024 * 1024, // far above the disk: the disk is what runs out
    retentionMaxAgeSeconds: 0,
    retentionMaxTopicBytes: 0,
    retentionIntervalMs: 3_600_000,
    maxAppendBatch: 1000,
    writerThread: "in-process",
  };
}

/** Bytes this process has passed to write(2) so far (`wchar` of /proc/self/io). */
function bytesWritten(): number {
  const io = Deno.readTextFileSync("/proc/self/io");
  return Number(/^wchar: (\d+)$/m.exec(io)![1]);
}

/** Appends until one fails; the failure. */
async function appendUntilRefused(backend: EmbeddedBackend): Promise<BackendError> {
  for (let i = 0; i < 10_000; i++) {
    try {
      await backend.append({ ...address, messages: [MESSAGE] });
    } catch (e) {
      assert.ok(e instanceof BackendError, String(e));
      return e;
    }
  }
  throw new Error("10,000 appends of 16 KiB fitted on a small disk");
}

Deno.test({
  name:
    `embedded store on a full disk: refused appends write nothing, the reason names the disk, appends resume within a second of space freed${SMALL_DISK_NOTE}`,
  ignore: SMALL_DISK_SKIP !== "",
  async fn() {
    await using disk = await mountSmallDisk(await Deno.makeTempDir({ prefix: "disk_room_" }), 64);
    const backend = new EmbeddedBackend(options(disk.dir));
    await backend.open();
    try {
      await backend.createTopic("s", "t", { partitions: 1 });
      await backend.append({ ...address, messages: [MESSAGE] });
      await disk.fill(DISK_RESERVE_BYTES + 300 * 1024); // room for a small segment, not a whole one
      const refused = await appendUntilRefused(backend);
      assert.equal(refused.code, "full");
      assert.match(refused.message, /The disk holding ".*store\.db-log" has \d+ bytes free/);
      const health = backend.health();
      assert.equal(health.ready, false);
      assert.match(health.reason!, /The disk holding/);
      assert.doesNotMatch(health.reason!, /max_store_bytes/);
      assert.match(health.detail!, /has \d+ bytes free \(reserve 4194304, below it/);
      // A burst of retries: refused at once, nothing written (no zero-fill to ENOSPC).
      const before = bytesWritten();
      const freeBefore = disk.free();
      for (let i = 0; i < 200; i++) {
        await assert.rejects(backend.append({ ...address, messages: [MESSAGE] }), /The disk/);
      }
      assert.ok(bytesWritten() - before < 64 * 1024, `${bytesWritten() - before} bytes written`);
      assert.ok(Math.abs(disk.free() - freeBefore) < 64 * 1024, "free space did not swing");
      // Reads go on.
      assert.ok((await backend.poll(address, 0, 10)).length > 0);
      // Space freed: ready again within a second or so, and the next append goes in.
      await disk.unfill();
      const freed = Date.now();
      await waitFor(() => backend.health().ready, 3000, "the store to see the freed space");
      assert.ok(Date.now() - freed <= 1500, `ready ${Date.now() - freed} ms after space freed`);
      await backend.append({ ...address, messages: [MESSAGE] });
    } finally {
      await backend.close();
    }
  },
});

Deno.test({
  name:
    `embedded store opened on a disk below its reserve: not ready (naming the disk), reads served, no crash${SMALL_DISK_NOTE}`,
  ignore: SMALL_DISK_SKIP !== "",
  async fn() {
    await using disk = await mountSmallDisk(await Deno.makeTempDir({ prefix: "disk_room_" }), 64);
    const first = new EmbeddedBackend(options(disk.dir));
    await first.open();
    await first.createTopic("s", "t", { partitions: 1 });
    await first.append({ ...address, messages: [MESSAGE] });
    await first.close();
    await disk.fill(DISK_RESERVE_BYTES / 2);
    const backend = new EmbeddedBackend(options(disk.dir));
    await backend.open();
    try {
      const health = backend.health();
      assert.equal(health.ready, false);
      assert.match(health.reason!, /The disk holding ".*store\.db-log" has \d+ bytes free/);
      assert.equal((await backend.poll(address, 0, 10)).length, 1);
      await disk.unfill();
      await waitFor(() => backend.health().ready, 3000, "the store to see the freed space");
    } finally {
      await backend.close();
    }
  },
});

Deno.test("DiskRoom: an ENOSPC is remembered and refused without measuring until the retry time; the timer lifts it once there is room", async () => {
  const dir = await Deno.makeTempDir({ prefix: "disk_room_unit_" });
  let now = 1_000;
  let lifted = 0;
  const room = new DiskRoom(dir, () => lifted++, () => now);
  try {
    const enospc = Object.assign(new Error("No space left on device (os error 28)"), {
      code: "ENOSPC",
    });
    const refusal = room.failed(enospc, 5000);
    assert.ok(refusal instanceof BackendError && refusal.code === "full");
    assert.match(refusal.message, /The disk holding ".*" has \d+ bytes free/);
    assert.equal(room.refusal, refusal);
    assert.throws(() => room.refuseEarly(), (e) => e === refusal);
    assert.equal(room.spareFits(4096), false, "no spare while refused");
    now += DISK_RETRY_MS;
    room.refuseEarly(); // the retry time passed: the next roll measures again
    // This temp dir's disk has room: the timer lifts the refusal by itself.
    await waitFor(() => lifted === 1, 3 * DISK_RETRY_MS, "the timer to see room");
    assert.equal(room.refusal, undefined);
    // Other errors pass through unremembered.
    const other = new Error("Input/output error");
    assert.equal(room.failed(other, 5000), other);
    assert.equal(room.refusal, undefined);
  } finally {
    room.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("DiskRoom.fit(): the wanted size where it fits above the reserve; unmeasurable disks are not refused", () => {
  const room = new DiskRoom("/nonexistent-dir-of-no-disk");
  assert.equal(room.fit(32 * 1024 * 1024, 4096), 32 * 1024 * 1024, "unknown free space: try");
  const here = new DiskRoom(Deno.cwd());
  assert.equal(here.fit(1024 * 1024, 4096), 1024 * 1024);
  assert.throws(() => here.fit(2 ** 52, 2 ** 52), /The disk holding/);
  assert.ok(here.refusal, "the refusal is remembered");
  here.close();
});
