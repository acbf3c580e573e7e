/**
 * The fuzzer in the normal suite: short, fixed-seed runs (the long run is `deno task fuzz`).
 * The first fuzzes the MQTT side (decoder, a live gateway over TCP and WebSocket), the second
 * what comes from elsewhere (Iggy replies, the loaders, gateways behind a hostile Iggy).
 */
import assert from "node:assert/strict";
import { fuzz } from "./fuzz.ts";

Deno.test({
  name:
    "fuzz() for 8 s with seed 1883 finds no crash or hang in the decoder or the live gateway (TCP and WebSocket)",
  async fn() {
    const report = await fuzz({ seconds: 8, seed: 1883, only: ["decoder", "sockets", "ws"] });
    console.log(
      `fuzz: ${report.inputs} inputs (${report.decoderInputs} decoder, ${report.socketInputs} ` +
        `socket, ${report.wsInputs} WebSocket), ${report.protocolErrors} protocol errors, ` +
        `${report.packets} packets, ${report.crashes} crashes, ${report.hangs} hangs, ` +
        `${report.witnessAcks} witness PUBACKs`,
    );
    assert.deepEqual(report.findings, {}, "findings");
    assert.equal(report.crashes, 0);
    assert.equal(report.hangs, 0);
    assert.ok(report.decoderInputs > 1000, "decoder inputs");
    assert.ok(report.socketInputs > 100, "socket inputs");
    assert.ok(report.wsInputs > 20, "WebSocket inputs");
    assert.ok(report.witnessAcks > 0, "the witness was served");
    assert.ok(report.protocolErrors > 0 && report.packets > 0, "both paths were exercised");
  },
});

Deno.test({
  name:
    "fuzz() for 8 s with seed 1883: Iggy replies and the loaders refuse cleanly; gateways behind a hostile Iggy (both modes, both dialects) keep PUBACKing and lose nothing",
  async fn() {
    const report = await fuzz({ seconds: 8, seed: 1883, only: ["replies", "loaders", "hostile"] });
    console.log(
      `fuzz: ${report.replyInputs} reply inputs (${report.replyRefusals} refused), ` +
        `${report.loaderInputs} loader inputs (${report.loaderRefusals} refused), ` +
        `${report.hostileRounds} hostile rounds: ${report.hostileCorrupted} of ` +
        `${report.hostileFrames} reply frames corrupted, ${report.hostileAcked} PUBACKed all in ` +
        `Iggy, ${report.witnessAcks} witness PUBACKs; ${report.crashes} crashes, ` +
        `${report.hangs} hangs`,
    );
    assert.deepEqual(report.findings, {}, "findings");
    assert.equal(report.crashes, 0);
    assert.equal(report.hangs, 0);
    assert.ok(report.replyInputs > 1000 && report.replyRefusals > 0, "reply inputs");
    assert.ok(report.replyInputs > report.replyRefusals, "some replies decoded");
    assert.ok(report.loaderInputs > 300 && report.loaderRefusals > 0, "loader inputs");
    assert.ok(report.hostileRounds >= 4, "all four setups (Iggy and forward mode, 0.11 and 0.12)");
    assert.ok(report.hostileCorrupted > 0, "replies were corrupted");
    assert.equal(report.witnessAcks, report.hostileBatches, "a witness PUBACK after every batch");
    assert.ok(report.hostileAcked > report.witnessAcks, "devices' messages were PUBACKed too");
  },
});
