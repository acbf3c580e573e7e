import assert from "node:assert/strict";
import {
  classOf,
  Code,
  evictionCode,
  IggyEvictionError,
  isResultFramed,
  operationFor,
} from "./codes.ts";

Deno.test("evictionCode() maps every eviction reason as Iggy's binary protocol 0.11 says", () => {
  const table: [number, number][] = [
    [0, 3],
    [1, 40],
    [2, 3],
    [3, 3],
    [4, 3],
    [5, 3],
    [6, 3],
    [7, 40],
    [8, 40],
    [9, 42],
    [10, 53],
    [11, 47],
    [12, 40],
    [13, 30],
    [14, 14003],
    [15, 4],
  ];
  for (const [reason, code] of table) assert.equal(evictionCode(reason), code, `reason ${reason}`);
});

Deno.test("IggyEvictionError for IncompatibleProtocol names both protocol versions", () => {
  const e = new IggyEvictionError(14, 0x3000, 0x3000);
  assert.match(e.message, /0\.12\.0/);
  assert.match(e.message, /0\.11\.0/);
  assert.equal(e.code, 14003);
});

Deno.test("operationFor() picks the operation byte per command", () => {
  assert.equal(operationFor(Code.LOGIN_REGISTER), 1);
  assert.equal(operationFor(Code.LOGIN_REGISTER_WITH_PAT), 1);
  assert.equal(operationFor(Code.CREATE_STREAM), 128);
  assert.equal(operationFor(Code.CREATE_TOPIC), 132);
  assert.equal(operationFor(Code.SEND_MESSAGES), 160);
  assert.equal(operationFor(Code.STORE_CONSUMER_OFFSET), 161);
  for (
    const c of [Code.PING, Code.GET_USER, Code.POLL_MESSAGES, Code.GET_TOPIC, Code.GET_STREAMS]
  ) {
    assert.equal(operationFor(c), 2, `code ${c} is NonReplicated`);
  }
});

Deno.test("classOf() and isResultFramed() follow the operation planes", () => {
  assert.equal(classOf(1), "register");
  assert.equal(classOf(2), "read");
  assert.equal(classOf(3), "metadata");
  assert.equal(classOf(128), "metadata");
  assert.equal(classOf(160), "partition");
  assert.equal(classOf(161), "partition");
  assert.ok(isResultFramed(128, 0) && isResultFramed(149, 0) && isResultFramed(161, 0));
  assert.ok(!isResultFramed(160, 10) && !isResultFramed(2, 10) && !isResultFramed(138, 4));
  assert.ok(isResultFramed(64, 4), "CreateTopicWithAssignments echo is metadata");
  assert.ok(isResultFramed(1, 4) && !isResultFramed(1, 0));
});
