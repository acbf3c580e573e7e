import assert from "node:assert/strict";
import { parseReplayFilter, parseReplayFrom } from "./replay_from.ts";

Deno.test("parseReplayFrom() reads earliest, latest, time:<epoch ms> and time:<RFC 3339>", () => {
  assert.deepEqual(parseReplayFrom("earliest"), { kind: "earliest" });
  assert.deepEqual(parseReplayFrom("latest"), { kind: "latest" });
  assert.deepEqual(parseReplayFrom("time:1700000000000"), { kind: "time", micros: 1.7e15 });
  assert.deepEqual(parseReplayFrom("time:2023-11-14T22:13:20Z"), { kind: "time", micros: 1.7e15 });
  for (const bad of ["", "first", "time:", "time:yesterday", "time:-5", "time:2023-13-99T00:00Z"]) {
    assert.equal(parseReplayFrom(bad), null, bad);
  }
});

Deno.test("parseReplayFilter() splits $replay/<from>/<filter>; other filters are not replays", () => {
  assert.deepEqual(parseReplayFilter("$replay/earliest/a/+/b"), {
    prefix: "$replay/earliest/",
    from: { kind: "earliest" },
    filter: "a/+/b",
  });
  assert.equal(parseReplayFilter("a/b"), null);
  assert.ok("problem" in parseReplayFilter("$replay/earliest")!);
  assert.ok("problem" in parseReplayFilter("$replay/earliest/")!);
  assert.ok("problem" in parseReplayFilter("$replay/soon/a")!);
});
