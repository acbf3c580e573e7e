import assert from "node:assert/strict";
import { FileSegment, segmentName } from "./_log_segment.ts";

/** A capacity that is neither a multiple of the small nor of the urgent fill step. */
const CAPACITY = 3 * 1024 * 1024 + 5 * 128 * 1024 + 4096;

async function filled(behind: (filled: number) => boolean, urgent = false): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "log_segment_test_" });
  try {
    const segment = await FileSegment.create(dir, 0, CAPACITY, {
      cancelled: () => false,
      urgent: () => urgent,
      behind,
    });
    try {
      const bytes = await Deno.readFile(`${dir}/${segmentName(0)}`);
      assert.equal(bytes.length, CAPACITY);
      assert.ok(bytes.every((b) => b === 0), "the segment is not all zeros");
      assert.equal(segment.capacity, CAPACITY);
      // Records go over the filled blocks and read back.
      segment.write(CAPACITY - 3, new Uint8Array([1, 2, 3]));
      const back = new Uint8Array(3);
      assert.equal(segment.readAt(CAPACITY - 3, back), 3);
      assert.deepEqual([...back], [1, 2, 3]);
    } finally {
      await segment.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("FileSegment.create zero-fills its whole capacity in small paced steps", async () => {
  await filled(() => false);
});

Deno.test("FileSegment.create zero-fills its whole capacity in big steps while behind", async () => {
  await filled(() => true);
});

Deno.test("FileSegment.create zero-fills its whole capacity in small steps without pauses once urgent", async () => {
  await filled(() => false, true);
});

Deno.test("FileSegment.create fills exactly when being behind comes and goes between steps", async () => {
  let step = 0;
  const seen: number[] = [];
  await filled((part) => {
    seen.push(part);
    return step++ % 3 === 0;
  });
  assert.equal(seen[0], 0, "asked with nothing filled first");
  assert.ok(seen.every((part, i) => part >= 0 && part < 1 && (i === 0 || part >= seen[i - 1])));
});

Deno.test("FileSegment.write puts records where asked, following on or jumping back", async () => {
  const dir = await Deno.makeTempDir({ prefix: "log_segment_test_" });
  try {
    const segment = await FileSegment.create(dir, 0, 64 * 1024);
    try {
      segment.write(100, new Uint8Array([1, 2]));
      segment.write(102, new Uint8Array([3])); // follows on: no seek needed
      segment.write(10, new Uint8Array([9])); // jumps back
      segment.write(11, new Uint8Array([8]));
      segment.write(200, new Uint8Array([7])); // jumps ahead
      const at = (pos: number, n: number) => {
        const back = new Uint8Array(n);
        segment.readAt(pos, back);
        return [...back];
      };
      assert.deepEqual(at(99, 5), [0, 1, 2, 3, 0]);
      assert.deepEqual(at(9, 4), [0, 9, 8, 0]);
      assert.deepEqual(at(199, 3), [0, 7, 0]);
    } finally {
      await segment.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
