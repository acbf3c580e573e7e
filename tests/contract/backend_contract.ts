/**
 * The backend contract: one suite of behaviours every {@link LogBackend} must show, run against
 * the embedded backend in CI and against a real Iggy server when one is reachable (DESIGN §6).
 *
 * Written for both: every test makes its own stream with a random suffix (a shared server keeps
 * data between runs), offsets are checked relative to what the test appended, and nothing relies
 * on SQLite (header order, for one, is compared as a set: Iggy keeps headers in a hash map).
 *
 * @module
 */
import assert from "node:assert/strict";
import { BackendError, type LogBackend, type OutgoingMessage } from "../../src/log/port.ts";

/** A backend under test and how to dispose of it (remove files, drop streams). */
export interface ContractSubject {
  readonly backend: LogBackend;
  readonly cleanup: () => Promise<void>;
}

/** What the suite may assume about a backend. */
export interface ContractOptions {
  /** Skip every case (e.g. no Iggy server configured); the runner shows them as ignored. */
  readonly ignore?: boolean;
  /** A user the backend knows, to test authenticate(); auth cases are skipped without it. */
  readonly credentials?: { readonly username: string; readonly password: string };
}

/**
 * Registers the contract's Deno tests, each named `[name] …`. `make` returns a fresh, not yet
 * opened backend for each case; the suite opens it and always calls close() then cleanup().
 */
export function runBackendContract(
  name: string,
  make: () => Promise<ContractSubject>,
  options: ContractOptions = {},
): void {
  const { ignore = false, credentials } = options;

  function test(
    title: string,
    fn: (backend: LogBackend, names: Names) => Promise<void>,
    skip = false,
  ): void {
    Deno.test({
      name: `[${name}] ${title}`,
      ignore: ignore || skip,
      async fn() {
        const { backend, cleanup } = await make();
        try {
          await backend.open();
          await fn(backend, uniqueNames());
        } finally {
          await backend.close();
          await cleanup();
        }
      },
    });
  }

  test("health() is ready after open() and not after close()", async (backend) => {
    assert.equal(backend.health().ready, true);
    await backend.close();
    const health = backend.health();
    assert.equal(health.ready, false);
    assert.ok(health.reason && health.reason.length > 0, "a closed backend says why");
  });

  test("getTopic() returns null when the stream or the topic is missing", async (b, n) => {
    assert.equal(await b.getTopic(n.stream, n.topic), null);
    await b.createTopic(n.stream, n.topic, { partitions: 1 });
    assert.equal(await b.getTopic(n.stream, `${n.topic}_other`), null);
  });

  test("createTopic() creates stream and topic with their partition count", async (b, n) => {
    const info = await b.createTopic(n.stream, n.topic, { partitions: 3 });
    const { acksBeforeDisk: _, ...fields } = info;
    assert.deepEqual(fields, { stream: n.stream, topic: n.topic, partitions: 3 });
    assert.deepEqual(await b.getTopic(n.stream, n.topic), info);
  });

  test(
    "createTopic() with durable: true makes a topic that confirms appends on disk",
    async (b, n) => {
      const info = await b.createTopic(n.stream, n.topic, { partitions: 1, durable: true });
      assert.ok(!info.acksBeforeDisk, "a durable topic confirms only once on disk");
      assert.ok(!(await b.getTopic(n.stream, n.topic))!.acksBeforeDisk, "as read back");
    },
  );

  test(
    "createTopic() of an existing topic returns it with its real partition count",
    async (b, n) => {
      await b.createTopic(n.stream, n.topic, { partitions: 2 });
      const again = await b.createTopic(n.stream, n.topic, { partitions: 5 });
      assert.equal(again.partitions, 2);
      const second = await b.createTopic(n.stream, `${n.topic}_2`, { partitions: 1 });
      assert.equal(second.partitions, 1, "a second topic goes into the existing stream");
    },
  );

  test("append() then poll() round-trips payload bytes and headers", async (b, n) => {
    await b.createTopic(n.stream, n.topic, { partitions: 1 });
    const address = { stream: n.stream, topic: n.topic, partition: 0 };
    const messages: OutgoingMessage[] = [
      message("plain", { "mqtt.topic": "a/b/c", "mqtt.qos": "1" }),
      {
        payload: new Uint8Array([0, 255, 1, 254, 0]),
        headers: new Map([["mqtt.topic", "héllo/wörld/€/😀"], ["k", "v with spaces"]]),
      },
      message("no headers", {}),
    ];
    const receipt = await b.append({ ...address, messages });
    const polled = await b.poll(address, 0, 10);
    assert.equal(polled.length, 3);
    if (receipt.baseOffset !== null) assert.equal(receipt.baseOffset, 0);
    for (let i = 0; i < 3; i++) {
      assert.equal(polled[i].offset, i);
      assert.equal(polled[i].partition, 0);
      assert.deepEqual(new Uint8Array(polled[i].payload), messages[i].payload);
      assert.deepEqual(sortedHeaders(polled[i].headers), sortedHeaders(messages[i].headers));
      // After 2017 and not from the future: microseconds, not ms or ns.
      assert.ok(polled[i].timestampMicros > 1.5e15 && polled[i].timestampMicros < 1e17);
    }
  });

  test("offsets start at 0 and count independently per partition", async (b, n) => {
    await b.createTopic(n.stream, n.topic, { partitions: 2 });
    const p0 = { stream: n.stream, topic: n.topic, partition: 0 };
    const p1 = { ...p0, partition: 1 };
    await b.append({ ...p0, messages: [message("a"), message("b")] });
    await b.append({ ...p1, messages: [message("x")] });
    await b.append({ ...p0, messages: [message("c")] });
    assert.deepEqual((await b.poll(p0, 0, 10)).map((m) => [m.offset, text(m.payload)]), [
      [0, "a"],
      [1, "b"],
      [2, "c"],
    ]);
    assert.deepEqual((await b.poll(p1, 0, 10)).map((m) => [m.offset, text(m.payload)]), [[0, "x"]]);
  });

  test("nextOffset() is 0 on an empty partition and counts appended messages", async (b, n) => {
    await b.createTopic(n.stream, n.topic, { partitions: 2 });
    const address = { stream: n.stream, topic: n.topic, partition: 1 };
    assert.equal(await b.nextOffset(address), 0);
    await b.append({ ...address, messages: [message("1"), message("2"), message("3")] });
    assert.equal(await b.nextOffset(address), 3);
    assert.equal(await b.nextOffset({ ...address, partition: 0 }), 0);
  });

  test("concurrent append() calls keep each call's order with contiguous offsets", async (b, n) => {
    await b.createTopic(n.stream, n.topic, { partitions: 1 });
    const address = { stream: n.stream, topic: n.topic, partition: 0 };
    const calls = Array.from(
      { length: 40 },
      (_, c) => Array.from({ length: 1 + (c % 3) }, (_, i) => message(`${c}:${i}`)),
    );
    const receipts = await Promise.all(calls.map((messages) => b.append({ ...address, messages })));
    const total = calls.reduce((sum, c) => sum + c.length, 0);
    const polled = await b.poll(address, 0, total + 10);
    assert.deepEqual(polled.map((m) => m.offset), [...Array(total).keys()]);
    const offsetOf = new Map(polled.map((m) => [text(m.payload), m.offset]));
    calls.forEach((messages, c) => {
      const first = offsetOf.get(`${c}:0`)!;
      if (receipts[c].baseOffset !== null) assert.equal(receipts[c].baseOffset, first);
      messages.forEach((_, i) => assert.equal(offsetOf.get(`${c}:${i}`), first + i));
    });
    assert.equal(await b.nextOffset(address), total);
  });

  test("poll() from the middle honours fromOffset and count", async (b, n) => {
    await b.createTopic(n.stream, n.topic, { partitions: 1 });
    const address = { stream: n.stream, topic: n.topic, partition: 0 };
    await b.append({ ...address, messages: [...Array(10).keys()].map((i) => message(`m${i}`)) });
    assert.deepEqual((await b.poll(address, 4, 3)).map((m) => text(m.payload)), ["m4", "m5", "m6"]);
    assert.deepEqual((await b.poll(address, 8, 100)).map((m) => m.offset), [8, 9]);
    assert.deepEqual(await b.poll(address, 10, 5), []);
  });

  test(
    "poll() returns exactly the messages from any offset, at most count, across appends",
    async (b, n) => {
      await b.createTopic(n.stream, n.topic, { partitions: 1 });
      const address = { stream: n.stream, topic: n.topic, partition: 0 };
      // Separate appends (stored as separate batches by a batching backend) of 3, 1, 4 and 2.
      let next = 0;
      for (const size of [3, 1, 4, 2]) {
        const messages = Array.from({ length: size }, () => message(`m${next++}`));
        await b.append({ ...address, messages });
      }
      for (let from = 0; from <= next; from++) {
        for (const count of [1, 2, 3, 5, 100]) {
          const expected = [...Array(next).keys()].filter((o) => o >= from).slice(0, count);
          const polled = await b.poll(address, from, count);
          assert.deepEqual(polled.map((m) => m.offset), expected, `from ${from} count ${count}`);
          assert.deepEqual(polled.map((m) => text(m.payload)), expected.map((o) => `m${o}`));
        }
      }
    },
  );

  test("poll() right after append() resolves returns the appended messages", async (b, n) => {
    await b.createTopic(n.stream, n.topic, { partitions: 1 });
    const address = { stream: n.stream, topic: n.topic, partition: 0 };
    for (let i = 0; i < 10; i++) {
      const before = await b.nextOffset(address);
      await b.append({ ...address, messages: [message(`a${i}`), message(`b${i}`)] });
      const polled = await b.poll(address, before, 10);
      assert.deepEqual(polled.map((m) => text(m.payload)), [`a${i}`, `b${i}`]);
    }
  });

  test("getOffset() right after storeOffset() resolves returns the stored offset", async (b, n) => {
    await b.createTopic(n.stream, n.topic, { partitions: 1 });
    const address = { stream: n.stream, topic: n.topic, partition: 0 };
    await b.append({ ...address, messages: [...Array(5).keys()].map((i) => message(`${i}`)) });
    for (let offset = 0; offset < 5; offset++) {
      await b.storeOffset(`gw_${n.id}`, address, offset);
      assert.equal(await b.getOffset(`gw_${n.id}`, address), offset);
    }
  });

  test(
    "deleteOffset() removes one consumer's offset on one partition; none stored resolves too",
    async (b, n) => {
      await b.createTopic(n.stream, n.topic, { partitions: 2 });
      const p0 = { stream: n.stream, topic: n.topic, partition: 0 };
      const p1 = { ...p0, partition: 1 };
      await b.append({ ...p0, messages: [message("a"), message("b")] });
      await b.append({ ...p1, messages: [message("c")] });
      const gone = `mqtt-session-gone_${n.id}`;
      const kept = `mqtt-session-kept_${n.id}`;
      await b.storeOffset(gone, p0, 1);
      await b.storeOffset(gone, p1, 0);
      await b.storeOffset(kept, p0, 0);
      await b.deleteOffset(gone, p0);
      assert.equal(await b.getOffset(gone, p0), null);
      assert.equal(await b.getOffset(gone, p1), 0, "its other partition is untouched");
      assert.equal(await b.getOffset(kept, p0), 0, "another consumer is untouched");
      await b.deleteOffset(gone, p0); // nothing stored any more: resolves all the same
      await b.storeOffset(gone, p0, 0);
      assert.equal(await b.getOffset(gone, p0), 0, "a store after the delete stands");
    },
  );

  test("storeOffset() and getOffset() keep one offset per consumer and partition", async (b, n) => {
    await b.createTopic(n.stream, n.topic, { partitions: 2 });
    const p0 = { stream: n.stream, topic: n.topic, partition: 0 };
    const p1 = { ...p0, partition: 1 };
    await b.append({ ...p0, messages: [...Array(5).keys()].map((i) => message(`${i}`)) });
    await b.append({ ...p1, messages: [message("x"), message("y")] });
    const gw1 = `gw_${n.id}_1`;
    const gw2 = `gw_${n.id}_2`;
    assert.equal(await b.getOffset(gw1, p0), null);
    await b.storeOffset(gw1, p0, 3);
    await b.storeOffset(gw1, p1, 1);
    assert.equal(await b.getOffset(gw1, p0), 3);
    assert.equal(await b.getOffset(gw1, p1), 1);
    assert.equal(await b.getOffset(gw2, p0), null);
    await b.storeOffset(gw1, p0, 4);
    assert.equal(await b.getOffset(gw1, p0), 4);
  });

  test("append() to a missing topic or partition rejects with not_found", async (b, n) => {
    const address = { stream: n.stream, topic: n.topic, partition: 0 };
    await rejectsWith(b.append({ ...address, messages: [message("x")] }), "not_found");
    await b.createTopic(n.stream, n.topic, { partitions: 2 });
    await rejectsWith(
      b.append({ ...address, partition: 2, messages: [message("x")] }),
      "not_found",
    );
    await rejectsWith(
      b.append({ ...address, topic: `${n.topic}_missing`, messages: [message("x")] }),
      "not_found",
    );
  });

  test("poll() of a missing topic rejects with not_found", async (b, n) => {
    await rejectsWith(
      b.poll({ stream: n.stream, topic: n.topic, partition: 0 }, 0, 10),
      "not_found",
    );
  });

  test("append() after close() rejects with unavailable", async (b, n) => {
    await b.createTopic(n.stream, n.topic, { partitions: 1 });
    await b.close();
    await b.close(); // idempotent
    await rejectsWith(
      b.append({ stream: n.stream, topic: n.topic, partition: 0, messages: [message("x")] }),
      "unavailable",
    );
  });

  test("authenticate() accepts the right password", async (b) => {
    const result = await b.authenticate(credentials!.username, credentials!.password);
    assert.equal(result.ok, true);
    if (result.ok) assert.equal(result.principal.username, credentials!.username);
  }, !credentials);

  test("authenticate() refuses a wrong password and an unknown user", async (b, n) => {
    assert.deepEqual(await b.authenticate(credentials!.username, `${credentials!.password}x`), {
      ok: false,
      reason: "bad_credentials",
    });
    assert.deepEqual(await b.authenticate(`nobody_${n.id}`, credentials!.password), {
      ok: false,
      reason: "bad_credentials",
    });
  }, !credentials);
}

/** Stream and topic names unique to one test run. */
interface Names {
  readonly id: string;
  readonly stream: string;
  readonly topic: string;
}

function uniqueNames(): Names {
  const id = crypto.randomUUID().slice(0, 8);
  return { id, stream: `contract_${id}`, topic: `topic_${id}` };
}

function message(body: string, headers: Record<string, string> = {}): OutgoingMessage {
  return { payload: new TextEncoder().encode(body), headers: new Map(Object.entries(headers)) };
}

function text(bytes: Uint8Array): string {
  return new TextDecoder().decode(bytes);
}

function sortedHeaders(headers: ReadonlyMap<string, string>): [string, string][] {
  return [...headers].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

async function rejectsWith(promise: Promise<unknown>, code: string): Promise<void> {
  await assert.rejects(promise, (e: unknown) => {
    assert.ok(e instanceof BackendError, `expected a BackendError, got ${e}`);
    assert.equal(e.code, code);
    return true;
  });
}
