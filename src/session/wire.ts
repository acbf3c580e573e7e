/**
 * The one place where handler outcomes become wire actions (encode, outbox push, close) and
 * counters. Handlers decide; this acts. A second protocol version (MQTT 5: reason codes,
 * properties) changes the encoding here and nowhere else.
 *
 * The PUBLISH fast path does not come through here (no outcome object per message): its
 * PUBACKs leave through the connection's `pubackReady`, its outcomes are counted in
 * `publish_batch.ts`.
 *
 * @module
 */
import {
  ConnackCode,
  encodeConnack,
  encodePingresp,
  encodeSuback,
  encodeUnsuback,
} from "../codec/encoder.ts";
import type { SessionContext } from "./context.ts";
import type { ConnackOutcome, Outcome } from "./outcome.ts";
import type { Outbox } from "./outbox.ts";

/** What acting needs of a connection. */
export interface WireSite {
  readonly outbox: Outbox;
  readonly remoteAddress: string;
  /** Takes no new packets and closes once what is queued has been written. */
  closeAfterFlush(reason: string): void;
  /** Forgets the will: it is not published when the connection closes. */
  discardWill(): void;
}

/** Carries out `o` on `site`. Synchronous; returns undefined so dispatchers can return it. */
export function act(ctx: SessionContext, site: WireSite, o: Outcome): undefined {
  switch (o.kind) {
    case "connack":
      if (o.code !== ConnackCode.ACCEPTED) countRefusal(ctx, site, o);
      // Session present only when a stored session was resumed [MQTT-3.2.2-1..3].
      site.outbox.push(encodeConnack(o.sessionPresent === true, o.code));
      if (o.code !== ConnackCode.ACCEPTED) site.closeAfterFlush(o.reason);
      return;
    case "suback":
      site.outbox.push(encodeSuback(o.packetId, o.codes));
      return;
    case "unsuback":
      site.outbox.push(encodeUnsuback(o.packetId));
      return;
    case "pingresp":
      site.outbox.push(encodePingresp());
      return;
    case "close":
      if (o.discardWill) site.discardWill();
      site.closeAfterFlush(o.reason);
      return;
  }
}

/** Counters and the log line of a refused CONNECT. */
function countRefusal(ctx: SessionContext, site: WireSite, o: ConnackOutcome): void {
  // CONNACK 1 is decided by the decoder's protocol check, before any login: it has its own
  // counter label and no "CONNECT refused" line.
  if (o.code === ConnackCode.UNACCEPTABLE_PROTOCOL_VERSION) {
    ctx.metrics.connectionsRefused.inc({ reason: "protocol_version" });
    return;
  }
  ctx.metrics.connectionsRefused.inc({ reason: `connack_${o.code}` });
  if (o.code === ConnackCode.BAD_USERNAME_OR_PASSWORD || o.code === ConnackCode.NOT_AUTHORIZED) {
    ctx.metrics.authFailures.inc();
  }
  ctx.logger.limited("info", "CONNECT refused", {
    code: o.code,
    reason: o.reason,
    remote: site.remoteAddress,
  });
}
