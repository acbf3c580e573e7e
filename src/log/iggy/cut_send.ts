/**
 * A send whose outcome is unknown — its connection was cut after the frame was written, so
 * Iggy may have stored it — is resolved instead of failed (0.11, which has no deduplication;
 * 0.12 resends under its producer stamp and never gets here). Once the partition's end stops
 * moving (the server may store a cut-off send a moment after the cut), its newest messages are
 * read back and searched for the batch's first message id, which is random per batch: found,
 * the send is confirmed at that offset; not found, the same frame (same ids) is sent again,
 * once. A device then gets its PUBACK instead of an error and a resend that could store its
 * message twice.
 *
 * A resend is written once unless the read-back missed a stored send: one Iggy stored later than
 * the settling look, or one hidden behind more than {@link READBACK.slack} newer messages from
 * other producers. It is counted as resent, not as a possible duplicate (which counts what is
 * left to the device's retry: a read-back or resend that failed too, or a timeout).
 *
 * @module
 */
import type { Address, PartitionOps } from "./partition_ops.ts";
import { BATCH_HEADER_SIZE, decodeSendReply } from "./batch.ts";
import { HEADER_SIZE } from "./header_layout.ts";
import { DecodeError } from "./bytes.ts";
import { IggyConnectionError } from "./codes.ts";
import { settled } from "../../base/settled.ts";

/**
 * Newer messages searched past the batch, messages per poll, and the tries of each read-back
 * request (the first may meet the cut connection before the pool replaced
 * it: tries back off from `retryMs`, doubling).
 */
export const READBACK = {
  slack: 10_000,
  perPoll: 5_000,
  tries: 6,
  retryMs: 25,
} as const;

/** What a resolve needs from the backend. */
export interface CutSendDeps {
  /** The dialect's partition operations in use now. */
  readonly ops: () => PartitionOps;
  /** The partition's next offset, fresh from Iggy (not a cache). */
  nextOffset(a: Address): Promise<number>;
  /** Consumer name of the backend's own polls. */
  readonly consumer: string;
}

/** How a cut send ended: found stored (at `baseOffset`), or sent again (its reply). */
export type CutSendOutcome =
  | { readonly found: true; readonly baseOffset: number }
  | { readonly found: false; readonly reply: Uint8Array };

/** The backend's resolver of cut sends, and what became of them. */
export class CutSends {
  readonly #deps: CutSendDeps;
  /** Found stored, sent again, and failed (read-back or resend: a possible duplicate). */
  readonly counts = { found: 0, resent: 0, failed: 0 };

  constructor(deps: CutSendDeps) {
    this.#deps = deps;
  }

  /**
   * The first offset of a send that failed with `cause`, its outcome unknown (null if the
   * resend's reply has none); throws when it cannot be resolved. Only a cut connection is read
   * back: after a timeout the connection still stands and Iggy may yet store the send, so a
   * read-back could miss it and the resend store it twice; the timeout is thrown.
   */
  async resolve(a: Address, frame: Uint8Array, count: number, cause: unknown, sentBy: unknown) {
    // Read back and resend only in the dialect that sent: a reconnect may have brought another.
    if (!(cause instanceof IggyConnectionError) || this.#deps.ops() !== sentBy) {
      this.counts.failed++;
      throw cause;
    }
    let outcome: CutSendOutcome;
    try {
      outcome = await resolveCutSend(this.#deps, a, frame, count);
    } catch (e) {
      this.counts.failed++;
      throw e;
    }
    if (outcome.found) this.counts.found++;
    else this.counts.resent++;
    return outcome.found ? outcome.baseOffset : decodeSendReply(outcome.reply);
  }
}

/** Resolves a cut send of `frame` (`count` messages) to `a`; throws when the resend fails. */
export async function resolveCutSend(
  deps: CutSendDeps,
  a: Address,
  frame: Uint8Array,
  count: number,
): Promise<CutSendOutcome> {
  const id = firstMessageId(frame);
  // A cut-off send may be stored a moment after the cut: read the end once it stops moving.
  const end = await settled(() => again(() => deps.nextOffset(a)));
  const from = Math.max(0, end - count - READBACK.slack);
  for (let at = from; at < end;) {
    const n = Math.min(READBACK.perPoll, end - at);
    const reply = await again(() => deps.ops().poll(deps.consumer, a, at, n));
    if (reply.messages.length === 0) break;
    for (const m of reply.messages) {
      if (m.offset >= at && m.id === id) return { found: true, baseOffset: m.offset };
    }
    // A reply may begin before `at` (its batch's start), never end before it: a server that
    // answers with nothing new would be asked again for ever.
    const last = reply.messages[reply.messages.length - 1].offset;
    if (last < at) {
      throw new DecodeError(
        `Iggy answered a poll from offset ${at} with messages up to offset ${last}`,
      );
    }
    at = last + 1;
  }
  return { found: false, reply: await deps.ops().send(a, frame, count) };
}

/** `request()`, tried up to {@link READBACK.tries} times; the last failure is thrown. */
async function again<T>(request: () => Promise<T>): Promise<T> {
  for (let i = 1;; i++) {
    try {
      return await request();
    } catch (e) {
      if (i >= READBACK.tries) throw e;
      await new Promise((r) => setTimeout(r, READBACK.retryMs * 2 ** (i - 1)));
    }
  }
}

/** The first message's id (u128 LE) of a SEND_MESSAGES frame from `SendEncoder.encode`. */
export function firstMessageId(frame: Uint8Array): bigint {
  const dv = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  const metadata = dv.getUint32(HEADER_SIZE, true);
  const at = HEADER_SIZE + 4 + metadata + BATCH_HEADER_SIZE + 8;
  return dv.getBigUint64(at, true) | (dv.getBigUint64(at + 8, true) << 64n);
}
