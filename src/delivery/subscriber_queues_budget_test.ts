/**
 * The global outbound budget (`mqtt_outbound_queue_bytes`) against every client's queue, under
 * seeded random offers, acknowledgements, socket writes, evictions and disconnects, with real
 * outboxes: after every step the budget equals the bytes the open queues hold, a closed queue
 * holds nothing and takes nothing, and every eviction is counted once.
 */
import assert from "node:assert/strict";
import { OutboundBudget, Outbox } from "../session/outbox.ts";
import type { Transport } from "../session/transport.ts";
import type { Subscriber } from "../session/delivery_port.ts";
import { DeadlineWheel } from "../base/deadline_wheel.ts";
import { GatewayMetrics } from "../observe/gateway_metrics.ts";
import { Logger } from "../observe/logger.ts";
import { encodePublish } from "../codec/encoder.ts";
import type { ClientQueue, Copy } from "./client_queue.ts";
import { ClientQueues } from "./subscriber_queues.ts";
import { AckLedger } from "./ledger.ts";

/** A socket whose writes complete only when the test says so. */
class HeldTransport implements Transport {
  readonly remoteAddress = "127.0.0.1";
  #held: (() => void)[] = [];
  start(): void {}
  pause(): void {}
  resume(): void {}
  close(): void {}
  write(bytes: Uint8Array): Promise<number> {
    return new Promise((r) => this.#held.push(() => r(bytes.length)));
  }
  /** Completes the writes in progress. */
  release(): void {
    const held = this.#held;
    this.#held = [];
    for (const r of held) r();
  }
}

/** xorshift32: the same steps for the same seed. */
function random(seed: number): (n: number) => number {
  let x = seed || 1;
  return (n) => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) % n;
  };
}

interface Client {
  readonly sub: Subscriber;
  readonly transport: HeldTransport;
  readonly queue: ClientQueue;
  closed: boolean;
}

const TOPIC = new TextEncoder().encode("sensors/1/data");

async function run(seed: number, steps: number): Promise<void> {
  const rnd = random(seed);
  const budget = new OutboundBudget(256 * 1024);
  const metrics = new GatewayMetrics();
  const clock = { now: () => performance.now() };
  const queues = new ClientQueues({
    limits: { maxInflight: 4, maxClientBytes: 16 * 1024, slowConsumerTimeoutMs: 60_000 },
    budget,
    deadlines: new DeadlineWheel(clock),
    clock,
    metrics,
    logger: new Logger("error"),
  });
  const ledger = new AckLedger(-1);
  const clients: Client[] = [];
  let evictions = 0; // evictions of a queue still open: each is counted, the others not
  const evict = (q: ClientQueue, reason: string) => {
    if (!q.closed) evictions++;
    queues.evict(q, reason);
  };
  let offset = 0;
  const connect = () => {
    const transport = new HeldTransport();
    const sub: Subscriber = {
      clientId: `c${clients.length}`,
      principal: { username: "", permissions: { global: {} as never, streams: new Map() } },
      outbox: null as unknown as Outbox,
      spanContext: null,
      session: null,
      // As a connection closes: the outbox drops its bytes, delivery detaches the queue.
      close() {
        c.closed = true;
        sub.outbox.close();
        queues.remove(sub)?.strikeAll();
      },
    };
    (sub as { outbox: Outbox }).outbox = new Outbox(transport, budget, sub);
    const c: Client = { sub, transport, queue: queues.queueOf(sub), closed: false };
    clients.push(c);
  };
  const copy = (bytes: number): Copy => {
    const payload = new Uint8Array(bytes);
    return {
      qos: 1,
      topicBytes: TOPIC,
      payload,
      ledger,
      entry: ledger.record(offset++, 1)!,
      bytes: TOPIC.length + bytes + 8,
      key: "k",
    };
  };
  for (let i = 0; i < 4; i++) connect();
  for (let step = 0; step < steps; step++) {
    const c = clients[rnd(clients.length)]; // closed ones too: late offers must find nothing
    const what = rnd(100);
    if (what < 35) {
      const offer = c.queue.offerQos1(copy(1 + rnd(6000)));
      if (c.closed) assert.equal(offer, "struck", `step ${step}: a closed queue took a copy`);
      if (offer === "evict") evict(c.queue, "hard cap");
    } else if (what < 55) {
      const offer = c.queue.offerQos0(encodePublish(TOPIC, new Uint8Array(rnd(4000)), 0, 0, false));
      if (c.closed) assert.equal(offer, "struck", `step ${step}: a closed queue took a copy`);
    } else if (what < 70) {
      queues.puback(c.sub, 1 + rnd(64));
    } else if (what < 85) {
      c.transport.release();
      await new Promise((r) => setTimeout(r, 0)); // the outbox's write loop moves on
    } else if (what < 90) {
      evict(c.queue, "timeout"); // again for a closed one: not counted again
    } else if (what < 95) {
      if (!c.closed) c.sub.close("disconnect");
    } else connect();
    let held = 0;
    for (const x of clients) {
      if (x.closed) assert.equal(x.queue.queuedBytes, 0, `step ${step}: closed queue holds bytes`);
      held += x.queue.queuedBytes;
    }
    assert.equal(budget.bytes, held, `step ${step} (seed ${seed}): budget vs the queues`);
    assert.equal(metrics.evictions.get(), evictions, `step ${step}: evictions counted once`);
  }
  for (const c of clients) if (!c.closed) c.sub.close("end");
  assert.equal(budget.bytes, 0, "every byte returned once every client is gone");
  queues.stop();
}

for (const seed of [1, 7, 42, 1234, 99991]) {
  Deno.test(`ClientQueues budget: global bytes equal the open queues' after every step (seed ${seed})`, async () => {
    await run(seed, 3000);
  });
}
