import assert from "node:assert/strict";
import { formatTraceparent, parseTraceparent } from "./trace_context.ts";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN = "00f067aa0ba902b7";

Deno.test("parseTraceparent reads the W3C example and formatTraceparent writes it back", () => {
  const v = `00-${TRACE}-${SPAN}-01`;
  assert.deepEqual(parseTraceparent(v), { traceId: TRACE, spanId: SPAN, flags: 1 });
  assert.equal(formatTraceparent(TRACE, SPAN, 1), v);
  assert.equal(formatTraceparent(TRACE, SPAN, 0), `00-${TRACE}-${SPAN}-00`);
});

Deno.test("parseTraceparent reads a later version by its first 55 characters", () => {
  assert.deepEqual(parseTraceparent(`01-${TRACE}-${SPAN}-00-what-comes-next`), {
    traceId: TRACE,
    spanId: SPAN,
    flags: 0,
  });
  assert.deepEqual(parseTraceparent(`cc-${TRACE}-${SPAN}-03`)?.flags, 3);
});

Deno.test("parseTraceparent refuses every malformed form", () => {
  const bad = [
    "",
    "garbage",
    `00-${TRACE}-${SPAN}`, // no flags
    `00-${TRACE}-${SPAN}-01-extra`, // version 00 is exactly 55 characters
    `01-${TRACE}-${SPAN}-01x`, // a later version: only a "-" may follow
    `ff-${TRACE}-${SPAN}-01`, // version ff is invalid
    `00-${TRACE.toUpperCase()}-${SPAN}-01`, // uppercase hex
    `00-${"0".repeat(32)}-${SPAN}-01`, // all-zero trace id
    `00-${TRACE}-${"0".repeat(16)}-01`, // all-zero parent id
    `00-${TRACE.slice(0, 31)}g-${SPAN}-01`,
    `00-${TRACE}-${SPAN.slice(0, 15)}z-01`,
    `00-${TRACE}-${SPAN}-0g`,
    `00_${TRACE}_${SPAN}_01`,
    `0x-${TRACE}-${SPAN}-01`,
  ];
  for (const v of bad) assert.equal(parseTraceparent(v), null, v);
});
