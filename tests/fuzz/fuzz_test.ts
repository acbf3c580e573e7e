/**
 * The fuzzer in the normal suite: a short, fixed-seed run (the long run is `deno task fuzz`).
 */
import assert from "node:assert/strict";
import { fuzz } from "./fuzz.ts";

Deno.test({
  name: "fuzz() for 8 s with seed 1883 finds no crash or hang in the decoder or the live gateway",
  async fn() {
    const report = await fuzz({ seconds: 8, seed: 1883 });
    console.log(
      `fuzz: ${report.inputs} inputs (${report.decoderInputs} decoder, ${report.socketInputs} ` +
        `socket), ${report.protocolErrors} protocol errors, ${report.packets} packets, ` +
        `${report.crashes} crashes, ${report.hangs} hangs, ${report.witnessAcks} witness PUBACKs`,
    );
    assert.deepEqual(report.findings, {}, "findings");
    assert.equal(report.crashes, 0);
    assert.equal(report.hangs, 0);
    assert.ok(report.decoderInputs > 1000, "decoder inputs");
    assert.ok(report.socketInputs > 100, "socket inputs");
    assert.ok(report.witnessAcks > 0, "the witness was served");
    assert.ok(report.protocolErrors > 0 && report.packets > 0, "both paths were exercised");
  },
});
