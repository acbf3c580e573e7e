import assert from "node:assert/strict";
import { FrameReader, MAX_FRAME_BYTES, READ_BUFFER_BYTES } from "./frame_reader.ts";
import { FrameWriter } from "./frame_writer.ts";
import { HEADER_SIZE, ReplyOffset } from "./header_layout.ts";
import type { Transport } from "./dial.ts";
import { IggyConnectionError } from "./codes.ts";

/** A frame of `bodyBytes` whose header and body bytes are `tag`. */
function frame(bodyBytes: number, tag: number): Uint8Array {
  const f = new Uint8Array(HEADER_SIZE + bodyBytes).fill(tag);
  new DataView(f.buffer).setUint32(ReplyOffset.SIZE, f.length, true);
  return f;
}

/** A `read` that hands out `bytes` in pieces of the given sizes (cycled), then end of stream. */
function reads(bytes: Uint8Array, pieces: number[]): Pick<Transport, "readable" | "read"> {
  let at = 0;
  let i = 0;
  return {
    readable: new ReadableStream(),
    read(into: Uint8Array): Promise<number | null> {
      if (at === bytes.length) return Promise.resolve(null);
      const n = Math.min(pieces[i++ % pieces.length], into.length, bytes.length - at);
      into.set(bytes.subarray(at, at + n));
      at += n;
      return Promise.resolve(n);
    },
  };
}

async function framesOf(t: Pick<Transport, "readable" | "read">) {
  const got: { header: Uint8Array; body: Uint8Array }[] = [];
  await new FrameReader(t, (f) => got.push(f), "test").run();
  return got;
}

Deno.test("FrameReader over read(): frames split across reads, several per read, and larger than its buffer", async () => {
  const sent = [frame(0, 1), frame(10, 2), frame(READ_BUFFER_BYTES * 3, 3), frame(300, 4)];
  const all = new Uint8Array(sent.reduce((n, f) => n + f.length, 0));
  let at = 0;
  for (const f of sent) {
    all.set(f, at);
    at += f.length;
  }
  for (const pieces of [[1], [7, 300], [100_000], [HEADER_SIZE - 1, 5000]]) {
    const got = await framesOf(reads(all, pieces));
    assert.equal(got.length, sent.length, `pieces ${pieces}`);
    got.forEach((f, i) => {
      assert.deepEqual(f.header, sent[i].subarray(0, HEADER_SIZE));
      assert.deepEqual(f.body, sent[i].subarray(HEADER_SIZE));
    });
  }
});

Deno.test("FrameReader over read(): a delivered frame keeps its bytes when the buffer is reused", async () => {
  const a = frame(20, 5);
  const b = frame(20, 6);
  const both = new Uint8Array(a.length + b.length);
  both.set(a);
  both.set(b, a.length);
  const got = await framesOf(reads(both, [a.length]));
  assert.ok(got[0].body.every((x) => x === 5));
  assert.ok(got[1].body.every((x) => x === 6));
});

Deno.test("FrameReader over read(): a size below the header or above the cap closes the reader", async () => {
  for (const size of [HEADER_SIZE - 1, MAX_FRAME_BYTES + 1]) {
    const f = frame(0, 0);
    new DataView(f.buffer).setUint32(ReplyOffset.SIZE, size, true);
    await assert.rejects(framesOf(reads(f, [f.length])), IggyConnectionError);
  }
});

Deno.test("FrameReader over read(): a failing read becomes an IggyConnectionError", async () => {
  const t = {
    readable: new ReadableStream<Uint8Array>(),
    read: () => Promise.reject(new Deno.errors.ConnectionReset("reset")),
  };
  await assert.rejects(framesOf(t), (e: Error) => {
    assert.ok(e instanceof IggyConnectionError);
    assert.match(e.message, /test failed: reset/);
    return true;
  });
});

Deno.test("FrameWriter over write(): short writes are continued and concurrent frames do not interleave", async () => {
  const out: number[] = [];
  let calls = 0;
  const t: Transport = {
    readable: new ReadableStream(),
    writable: new WritableStream(),
    close() {},
    async write(bytes: Uint8Array): Promise<number> {
      calls++;
      await new Promise((r) => setTimeout(r, 0));
      const n = Math.min(3, bytes.length);
      out.push(...bytes.subarray(0, n));
      return n;
    },
  };
  const w = new FrameWriter(t);
  await Promise.all([w.write(new Uint8Array(10).fill(1)), w.write(new Uint8Array(7).fill(2))]);
  assert.deepEqual(out, [...new Array(10).fill(1), ...new Array(7).fill(2)]);
  assert.equal(calls, 4 + 3);
});

Deno.test("FrameWriter over write(): a socket that takes no bytes fails the write, and the next one still runs", async () => {
  let taken = 0;
  const t: Transport = {
    readable: new ReadableStream(),
    writable: new WritableStream(),
    close() {},
    write: (bytes) => Promise.resolve(taken++ === 0 ? 0 : bytes.length),
  };
  const w = new FrameWriter(t);
  const first = w.write(new Uint8Array(4));
  const second = w.write(new Uint8Array(4));
  await assert.rejects(first, Deno.errors.BrokenPipe);
  await second;
});

Deno.test("FrameWriter without write() goes through the writable stream", async () => {
  const chunks: Uint8Array[] = [];
  const t: Transport = {
    readable: new ReadableStream(),
    writable: new WritableStream({ write: (c) => void chunks.push(c) }),
    close() {},
  };
  const w = new FrameWriter(t);
  await w.write(Uint8Array.of(1, 2));
  await w.close();
  assert.deepEqual(chunks, [Uint8Array.of(1, 2)]);
});
