import assert from "node:assert/strict";
import { COMMANDS } from "./commands.ts";
import { commandUsage, overviewUsage, synopsis } from "./usage.ts";

Deno.test("commandUsage() lists every option of its command and nothing else", () => {
  for (const spec of COMMANDS) {
    const text = commandUsage(spec);
    assert.match(text, new RegExp(`^Usage: iggy-mqtt-gateway ${spec.name}`));
    for (const o of spec.options) {
      assert.ok(text.includes(`--${o.name}`), `${spec.name} --${o.name}`);
    }
    const mentioned = [...text.matchAll(/--([a-z][a-z-]*)/g)].map((m) => m[1]);
    for (const name of mentioned) {
      assert.ok(
        name === "help" || spec.options.some((o) => o.name === name),
        `${spec.name} usage mentions --${name}`,
      );
    }
  }
});

Deno.test("synopsis() shows required options bare, exclusive ones as alternatives", () => {
  const read = COMMANDS.find((c) => c.name === "read")!;
  assert.match(synopsis(read), /^iggy-mqtt-gateway read --stream S --topic T \[--partition P\]/);
  const check = COMMANDS.find((c) => c.name === "check")!;
  assert.equal(
    synopsis(check),
    "iggy-mqtt-gateway check [--config FILE | --map FILE | --env-only] [--offline]",
  );
  const explain = COMMANDS.find((c) => c.name === "explain")!;
  assert.equal(
    synopsis(explain),
    "iggy-mqtt-gateway explain [--config FILE | --map FILE] [--json] TOPIC…",
  );
});

Deno.test("overviewUsage() names every command", () => {
  const text = overviewUsage();
  for (const spec of COMMANDS) assert.match(text, new RegExp(`^  ${spec.name} `, "m"));
});
