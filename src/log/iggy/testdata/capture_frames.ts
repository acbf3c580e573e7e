/**
 * Captures real reply frames from a live Iggy server into this folder (`*.hex`), for
 * `fixtures_test.ts`. Writes frames by hand (fixed client id, request ids as
 * Iggy's binary protocol 0.11 (Iggy server 0.9) assigns them)
 * so the bytes are exactly what the server answered. Creates and deletes stream "fixture".
 *
 *   IGGY_TEST_ADDRESS=127.0.0.1:8090 deno run -A src/log/iggy/testdata/capture_frames.ts
 *
 * @module
 */
import { HEADER_SIZE, readFrameSize, writeRequestHeader } from "../header_layout.ts";
import { classOf, operationFor } from "../codes.ts";
import { encodeRegister } from "../login.ts";
import { loadHashes } from "../../../base/xxhash.ts";
import { ByteWriter, toHex, toUtf8 } from "../bytes.ts";
import { encodeUserHeaders, writeNumericIdentifier } from "../encoding.ts";
import { encodeSendMessages } from "../batch.ts";
import * as cmd from "../v11/request_bodies.ts";
await loadHashes();
const out = new URL(".", import.meta.url).pathname;
const [host, port] = (Deno.env.get("IGGY_TEST_ADDRESS") ?? "127.0.0.1:8090").split(":");
await Deno.mkdir(out, { recursive: true });

async function session() {
  const conn = await Deno.connect({ hostname: host, port: Number(port) });
  const reader = conn.readable.getReader();
  let buf: Uint8Array = new Uint8Array(0);
  async function frame(): Promise<Uint8Array> {
    for (;;) {
      if (buf.length >= HEADER_SIZE && buf.length >= readFrameSize(buf)) {
        const n = readFrameSize(buf);
        const f = buf.slice(0, n);
        buf = buf.slice(n);
        return f;
      }
      const { value } = await reader.read();
      const j = new Uint8Array(buf.length + value!.length);
      j.set(buf);
      j.set(value!, buf.length);
      buf = j;
    }
  }
  const client = 0x1234_5678_9abc_def0_1122_3344_5566_7788n;
  let sessionId = 0n;
  let counter = 1n;
  const writer = conn.writable.getWriter();
  async function send(code: number, body: Uint8Array): Promise<Uint8Array> {
    const op = operationFor(code);
    const k = classOf(op);
    const request = k === "register" ? 0n : k === "metadata" ? counter++ : counter;
    const h = writeRequestHeader({
      bodyLength: body.length,
      client,
      request,
      operation: op,
      session: k === "register" ? 0n : sessionId,
      code: op === 2 ? code : undefined,
    });
    const f = new Uint8Array(h.length + body.length);
    f.set(h);
    f.set(body, h.length);
    await writer.write(f);
    return await frame();
  }
  return { send, setSession: (s: bigint) => (sessionId = s), close: () => conn.close() };
}
async function save(name: string, f: Uint8Array) {
  await Deno.writeTextFile(`${out}/${name}.hex`, toHex(f) + "\n");
  console.log(name, f.length);
}

const s = await session();
const reg = encodeRegister({ kind: "password", username: "iggy", password: "iggy" });
const r = await s.send(reg.code, reg.body);
await save("register_reply", r);
s.setSession(new DataView(r.buffer).getBigUint64(HEADER_SIZE + 4 + 4, true));
const stream = "fixture", topic = "t";
await save("create_stream_reply", await s.send(202, cmd.createStreamBody(stream)));
await save(
  "create_topic_reply",
  await s.send(302, cmd.createTopicBody(stream, topic, { partitions: 2 })),
);
await save(
  "create_topic_exists_reply",
  await s.send(302, cmd.createTopicBody(stream, topic, { partitions: 2 })),
);
const msgs = [
  {
    id: 7n,
    payload: toUtf8("first-payload"),
    userHeaders: encodeUserHeaders(new Map([["mqtt.topic", "a/b"]])),
    originTimestampMicros: 1_700_000_000_000_000n,
  },
  {
    id: 8n,
    payload: toUtf8("second-payload"),
    userHeaders: new Uint8Array(0),
    originTimestampMicros: 1_700_000_000_000_050n,
  },
];
await save("send_messages_reply", await s.send(101, encodeSendMessages(stream, topic, 1, msgs)));
await save("get_topic_reply", await s.send(300, cmd.getTopicBody(stream, topic)));
await save("get_topic_missing_reply", await s.send(300, cmd.getTopicBody(stream, "missing")));
await save(
  "poll_messages_reply",
  await s.send(100, cmd.pollBody("mqtt-gateway-poll", { stream, topic, partition: 1 }, 0, 10)),
);
await save(
  "poll_missing_stream_reply",
  await s.send(
    100,
    cmd.pollBody("mqtt-gateway-poll", { stream: "missing", topic, partition: 0 }, 0, 10),
  ),
);
await save(
  "get_offset_none_reply",
  await s.send(120, cmd.getOffsetBody("fx", { stream, topic, partition: 1 })),
);
await save(
  "store_offset_reply",
  await s.send(121, cmd.storeOffsetBody("fx", { stream, topic, partition: 1 }, 1)),
);
await save(
  "get_offset_reply",
  await s.send(120, cmd.getOffsetBody("fx", { stream, topic, partition: 1 })),
);
await save(
  "get_user_root_reply",
  await s.send(31, writeNumericIdentifier(new ByteWriter(), 0).finish()),
);
await save(
  "delete_stream_reply",
  await s.send(203, new ByteWriter().u8(2).u8(stream.length).bytes(toUtf8(stream)).finish()),
);
s.close();
const bad = await session();
const reg2 = encodeRegister({ kind: "password", username: "iggy", password: "wrong" });
await save("register_bad_password_eviction", await bad.send(reg2.code, reg2.body));
bad.close();
