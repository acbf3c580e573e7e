import assert from "node:assert/strict";
import { encodeHeaders } from "../header_blob.ts";
import { OffsetDigits, tlvBytesOf, writeTlvOf } from "./blob_to_tlv.ts";
import { EncodeError, encodeUserHeaders } from "./encoding.ts";

/** The blob's TLV as the transcoder writes it. */
function transcode(headers: Map<string, string>): Uint8Array {
  const blob = encodeHeaders(headers);
  const n = tlvBytesOf(blob, 0, blob.length);
  const out = new Uint8Array(n + 8).fill(0xee);
  const end = writeTlvOf(out, 4, blob, 0, blob.length);
  assert.equal(end, 4 + n, "writes exactly the bytes it sized");
  assert.deepEqual([...out.subarray(0, 4), ...out.subarray(end)], Array(8).fill(0xee));
  return out.slice(4, end);
}

Deno.test("blob headers transcode to the same TLV as the map's: coded keys, spelled keys, UTF-8, long values", () => {
  const cases = [
    new Map([["mqtt.topic", "plant/3/line/7/temp"], ["mqtt.qos", "1"], ["mqtt.client_id", "s-1"]]),
    new Map([["mqtt.packet_id", "65535"], ["mqtt.retain", "true"], ["mqtt.empty", "true"]]),
    new Map([["mqtt5.user.0.Größe", "naïve ☃"], ["mqtt5.content_type", "application/json"]]),
    new Map([["mqtt.topic", "t/".repeat(120)], ["k".repeat(200), "v".repeat(255)]]),
    new Map([["mqtt.gateway", "edge-7"], ["mqtt.origin", "2/123456789"]]),
    new Map<string, string>(),
  ];
  for (const headers of cases) {
    assert.deepEqual(transcode(headers), encodeUserHeaders(headers), [...headers.keys()].join());
  }
});

Deno.test("blob headers Iggy cannot take are refused with EncodeError, sizing before writing", () => {
  for (
    const headers of [
      new Map([["mqtt.topic", ""]]), // an empty value
      new Map([["", "x"]]), // an empty key
      new Map([["mqtt.topic", "x".repeat(256)]]), // a value over 255 bytes
      new Map([["k".repeat(256), "x"]]), // a key over 255 bytes
    ]
  ) {
    const blob = encodeHeaders(headers);
    assert.throws(() => tlvBytesOf(blob, 0, blob.length), EncodeError);
  }
  const blob = encodeHeaders(new Map([["mqtt.topic", "a/b"]]));
  assert.throws(() => tlvBytesOf(blob, 0, blob.length - 1), EncodeError, "truncated");
  assert.throws(() => tlvBytesOf(Uint8Array.of(0, 99, 1, 65), 0, 4), EncodeError, "unknown code");
});

Deno.test("OffsetDigits counts up as String() writes, across every carry", () => {
  for (const first of [0, 8, 95, 998, 99_990, 2 ** 40 - 3]) {
    const digits = new OffsetDigits(first);
    const out = new Uint8Array(32);
    for (let n = first; n < first + 30; n++) {
      const end = digits.writeTo(out, 3);
      assert.equal(new TextDecoder().decode(out.subarray(3, end)), String(n));
      assert.equal(digits.length, String(n).length);
      digits.increment();
    }
  }
});
