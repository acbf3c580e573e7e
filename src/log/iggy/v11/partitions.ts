/**
 * Partition operations of protocol 0.11 (Iggy 0.9): each request goes, in lockstep, on
 * whichever service connection the pool picks; the server routes it. A send whose outcome is
 * unknown (a cut connection, a timeout) is not resent here: the device's retry is, and may be
 * stored twice ({@link PartitionOps011.mayHaveStored}).
 *
 * @module
 */
import { decodePollReply, type PollReply } from "../batch.ts";
import { Code } from "../codes.ts";
import * as cmd from "./request_bodies.ts";
import {
  type Address,
  type PartitionOps,
  type PartitionOpsDeps,
  type PoolRequest,
  uncertain,
} from "../partition_ops.ts";

/** 0.11 partition operations. */
export class PartitionOps011 implements PartitionOps {
  readonly #request: PoolRequest;
  readonly stats = { resends: 0, renewals: 0 };

  constructor(deps: PartitionOpsDeps) {
    this.#request = deps.request;
  }

  send(_a: Address, frame: Uint8Array): Promise<Uint8Array> {
    return this.#request(Code.SEND_MESSAGES, frame, true, {});
  }

  async poll(consumer: string, a: Address, from: number, count: number): Promise<PollReply> {
    const body = cmd.pollBody(consumer, a, from, count);
    return decodePollReply(await this.#request(Code.POLL_MESSAGES, body, false, {}));
  }

  async storeOffset(consumer: string, a: Address, offset: number): Promise<void> {
    const body = cmd.storeOffsetBody(consumer, a, offset);
    await this.#request(Code.STORE_CONSUMER_OFFSET, body, false, {});
  }

  async deleteOffset(consumer: string, a: Address): Promise<void> {
    const body = cmd.deleteOffsetBodyWithAck(consumer, a);
    await this.#request(Code.DELETE_CONSUMER_OFFSET, body, false, {});
  }

  async getOffset(consumer: string, a: Address): Promise<number | null> {
    const body = cmd.getOffsetBody(consumer, a);
    return cmd.decodeOffsetReply(await this.#request(Code.GET_CONSUMER_OFFSET, body, false, {}));
  }

  mayHaveStored(e: unknown): boolean {
    return uncertain(e);
  }

  cancelAll(): void {}
}
