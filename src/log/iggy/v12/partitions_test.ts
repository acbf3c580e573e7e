/**
 * PartitionOps012 against a scripted request function: the paths a fake server cannot easily
 * produce (a request that never left the gateway, an abort while a deferred poll is written).
 */
import assert from "node:assert/strict";
import { loadHashes } from "../../../base/xxhash.ts";
import { Code, IggyError } from "../codes.ts";
import { NotSentError } from "../codes.ts";
import { SendEncoder } from "../send_encoder.ts";
import type { RequestOptions012 } from "./pipelined_connection.ts";
import { DeferredCancelledError } from "./pipelined_connection.ts";
import { PartitionOps012 } from "./partitions.ts";
import { Code012, Status012 } from "./wire.ts";
import { NO_WAIT } from "../../port.ts";

await loadHashes();
const A = { stream: "s", topic: "t", partition: 0 };

/** 105's 25-byte reply: incarnation 7, metadata op 9, view 0, 1 partition, primary 0. */
function routeReply(): Uint8Array {
  const b = new Uint8Array(25);
  const v = new DataView(b.buffer);
  v.setBigUint64(0, 7n, true);
  v.setBigUint64(8, 9n, true);
  v.setUint32(20, 1, true);
  return b;
}

type Script = (code: number, o: RequestOptions012) => Promise<Uint8Array>;

function ops(script: Script): PartitionOps012 {
  return new PartitionOps012({
    request: (code, _body, _framed, o) =>
      code === Code012.GET_PARTITION_ROUTE ? Promise.resolve(routeReply()) : script(code, o ?? {}),
    session: () => 3n,
    timeoutMs: 1000,
  });
}

function frame(): Uint8Array {
  const text = new TextEncoder().encode("m");
  return new SendEncoder().encode("s", "t", 0, [{ payload: text, headers: new Map() }], 1);
}

const sendReply = new Uint8Array(24);

Deno.test("PartitionOps012: a send that was never written (NotSentError) is not uncertain", async () => {
  let n = 0;
  const p = ops((code) => {
    assert.equal(code, Code.SEND_MESSAGES);
    n++;
    if (n === 1) return Promise.reject(new NotSentError("no connection"));
    if (n === 2) return Promise.reject(new IggyError(Status012.PRODUCER_UNKNOWN, "unknown"));
    return Promise.resolve(sendReply);
  });
  await p.send(A, frame(), 1);
  assert.equal(n, 3, "94 after a send that never left renews the producer and sends again");
  assert.equal(p.stats.resends, 0);
});

Deno.test("PartitionOps012: a new producer while no connection is live waits for one (a route lookup) instead of failing", async () => {
  const asked: number[] = [];
  let live = false;
  const p = new PartitionOps012({
    request: (code) => {
      asked.push(code);
      if (code !== Code012.GET_PARTITION_ROUTE) return Promise.resolve(sendReply);
      live = true; // the pool answers once a fresh connection is registered
      return Promise.resolve(routeReply());
    },
    session: () => (live ? 3n : undefined),
    timeoutMs: 1000,
  });
  await p.send(A, frame(), 1);
  assert.deepEqual(asked, [Code012.GET_PARTITION_ROUTE, Code.SEND_MESSAGES]);
});

Deno.test("PartitionOps012: an abort while the deferred poll is being written cancels it at once", async () => {
  const ac = new AbortController();
  const p = ops((code, o) => {
    if (code === Code.POLL_MESSAGES) return Promise.resolve(new Uint8Array(0)); // caught up
    assert.equal(code, Code012.POLL_MESSAGES_DEFERRED);
    return new Promise((_resolve, reject) => {
      ac.abort(); // before the connection hands over its cancel
      o.onSent!(() => reject(new DeferredCancelledError()));
    });
  });
  await p.poll("c", A, 0, 10);
  const r = await Promise.race([
    p.poll("c", A, 0, 10, ac.signal).then((x) => x.messages.length),
    new Promise((r) => setTimeout(() => r("still waiting"), 500)),
  ]);
  assert.equal(r, 0);
});

Deno.test("PartitionOps012: a caught-up poll with a signal already aborted (NO_WAIT) polls plainly, never deferred", async () => {
  const codes: number[] = [];
  const p = ops((code) => {
    codes.push(code);
    return Promise.resolve(new Uint8Array(0)); // nothing stored: caught up
  });
  await p.poll("c", A, 0, 10);
  await p.poll("c", A, 0, 10, NO_WAIT);
  await p.poll("c", A, 0, 10, NO_WAIT);
  assert.deepEqual(codes, [Code.POLL_MESSAGES, Code.POLL_MESSAGES, Code.POLL_MESSAGES]);
  assert.equal(p.stats.longPolls, 0);
});
