/**
 * Consumer group bodies and replies as Iggy server 0.9 (protocol 0.11) reads and writes them
 * (checked against a real server by `tests/e2e/iggy_shared_subscription_test.ts`), and what
 * `IggyGroups` makes of the expected refusals.
 */
import assert from "node:assert/strict";
import { IggyError } from "./codes.ts";
import {
  createGroupBody,
  decodeMembers,
  decodeSync,
  groupBody,
  GroupCode,
  IggyGroups,
} from "./consumer_groups.ts";
import type { Link } from "./dialect.ts";

const name = (s: string) => [2, s.length, ...new TextEncoder().encode(s)];

Deno.test("consumer group bodies: streams, topics and groups by name; CREATE takes a bare Name", () => {
  assert.deepEqual([...groupBody("s", "t", "g")], [...name("s"), ...name("t"), ...name("g")]);
  assert.deepEqual([...createGroupBody("s", "t", "gg")], [...name("s"), ...name("t"), 2, 103, 103]);
});

Deno.test("SYNC reply: the partitions owned, sorted; nothing (not a member) is null", () => {
  const b = new DataView(new ArrayBuffer(8 + 4 + 8));
  b.setBigUint64(0, 7n, true);
  b.setUint32(8, 2, true);
  b.setUint32(12, 3, true);
  b.setUint32(16, 1, true);
  assert.deepEqual(decodeSync(new Uint8Array(b.buffer)), [1, 3]);
  assert.equal(decodeSync(new Uint8Array(0)), null);
});

Deno.test("GET reply: the member count; nothing (no such group) is 0", () => {
  const b = new DataView(new ArrayBuffer(12 + 2));
  b.setUint32(0, 5, true);
  b.setUint32(4, 4, true);
  b.setUint32(8, 2, true);
  b.setUint8(12, 1);
  b.setUint8(13, 103);
  assert.equal(decodeMembers(new Uint8Array(b.buffer)), 2);
  assert.equal(decodeMembers(new Uint8Array(0)), 0);
});

Deno.test("IggyGroups: join makes the group when missing (5004 exists is fine); leave of none is fine", async () => {
  const sent: number[] = [];
  const answers = new Map<number, () => Uint8Array>([
    [GroupCode.CREATE, () => {
      throw new IggyError(5004, "exists");
    }],
    [GroupCode.JOIN, () => new Uint8Array(0)],
    [GroupCode.LEAVE, () => {
      throw new IggyError(5006, "not a member");
    }],
  ]);
  const link = {
    isClosed: false,
    request: (code: number) => {
      sent.push(code);
      try {
        return Promise.resolve(answers.get(code)!());
      } catch (e) {
        return Promise.reject(e);
      }
    },
    close: () => Promise.resolve(),
  } as unknown as Link;
  const g = new IggyGroups(() => Promise.resolve(link));
  await g.join("s", "t", "g");
  await g.leave("s", "t", "g");
  assert.deepEqual(sent, [GroupCode.CREATE, GroupCode.JOIN, GroupCode.LEAVE]);
  answers.set(GroupCode.JOIN, () => {
    throw new IggyError(41, "unauthorized");
  });
  await assert.rejects(g.join("s", "t", "g"), /unauthorized/);
  await g.close();
});
