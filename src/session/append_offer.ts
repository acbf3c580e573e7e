/**
 * One append and its offer to live subscribers, the same for a PUBLISH batch and a will: live
 * subscribers get the messages once the backend has committed them (`onCommitted`: embedded,
 * written but not yet synced) or, from a backend that does not call it, at its receipt; a
 * backend that lets go of the messages once encoded gets the only reference unless a reader of
 * the partition or a wildcard subscription wants them (the reader is then told to poll); a
 * target the backend no longer has leaves the topic cache, so the next publish checks it again.
 *
 * @module
 */
import {
  type AppendReceipt,
  BackendError,
  type OutgoingMessage,
  type PartitionAddress,
} from "../log/port.ts";
import type { LogBackend } from "../log/port.ts";
import type { DeliveryPort } from "./delivery_port.ts";
import { placedAt, type PublishPreparer } from "./publish.ts";

/** The services an append uses: a part of the session context. */
export interface AppendContext {
  readonly backend: LogBackend;
  readonly delivery: DeliveryPort;
  readonly preparer: PublishPreparer;
}

/** What is appended: `messages` is replaced by an empty list once nobody needs them after. */
export interface OfferedAppend {
  /** The target; `balancedOver` set = the backend picks the partition. */
  readonly address: PartitionAddress & { readonly balancedOver?: number };
  messages: OutgoingMessage[];
}

/**
 * Appends `a.messages` to `a.address` and offers them to live subscribers (see above);
 * `syncLater`: only QoS 0 messages, nobody waits for their sync (`AppendRequest.syncLater`);
 * `orderGroup`: the sender's order across a failure (`AppendRequest.orderGroup`).
 */
export function appendAndOffer(
  ctx: AppendContext,
  a: OfferedAppend,
  syncLater = false,
  orderGroup?: object,
): Promise<AppendReceipt> {
  let offered = false;
  const onCommitted = (baseOffset: number) => {
    offered = true;
    ctx.delivery.notifyAppended(a.address, baseOffset, a.messages);
  };
  const appended = ctx.backend.append({
    ...a.address,
    messages: a.messages,
    onCommitted,
    syncLater,
    orderGroup,
  });
  // On the Iggy path: held until the receipt, every message in flight survives the scavenges of
  // a whole send; dropped here, they die young and the GC's share of the gateway's busy time
  // drops.
  if (ctx.backend.remote?.releasesMessages && ctx.delivery.wantsAppended?.(a.address) === false) {
    a.messages = [];
  }
  return appended.then(
    (receipt) => {
      if (!offered) {
        ctx.delivery.notifyAppended(
          placedAt(a.address, receipt.partition),
          receipt.baseOffset,
          a.messages,
        );
      }
      return receipt;
    },
    (err) => {
      if (err instanceof BackendError && err.code === "not_found") {
        ctx.preparer.topics.invalidate(a.address.stream, a.address.topic);
      }
      throw err;
    },
  );
}
