/**
 * The one place where handler outcomes become wire actions (encode, outbox push, close) and
 * counters. Handlers decide; this acts. A second protocol version (MQTT 5: reason codes,
 * properties) changes the encoding here and nowhere else.
 *
 * The PUBLISH path does not come through here (no outcome object per message): its
 * acknowledgements are encoded in `publish_acks.ts` (the plain 4-byte ones by the outbox) and
 * go from the appender's `AckQueue` straight into the outbox; its outcomes are counted in
 * `connection_publisher.ts` and `appender.ts`.
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
import {
  encodeConnack5,
  encodeDisconnect5,
  encodeRefusal5,
  encodeSuback5,
  encodeUnsuback5,
  PropertyWriter,
} from "../codec/encode_v5.ts";
import { Prop } from "../codec/properties.ts";
import { connackReason5 } from "./connect_v5.ts";
import type { SessionContext } from "./context.ts";
import type { ConnackOutcome, Outcome } from "./outcome.ts";
import type { Outbox } from "./outbox.ts";
import type { V5Session } from "./v5_session.ts";

/** The services that turn outcomes into wire actions use: counters and the refusal log. */
export type WireContext = Pick<SessionContext, "metrics" | "refusalLog">;

/** What acting needs of a connection. */
export interface WireSite {
  readonly outbox: Outbox;
  readonly remoteAddress: string;
  /** Which listener accepted the connection, for the refusal log. */
  readonly listener: string;
  /** The connection's CONNECT was MQTT 5: packets go out in the MQTT 5 format. */
  readonly speaks5: boolean;
  /** Takes no new packets and closes once what is queued has been written. */
  closeAfterFlush(reason: string): void;
  /** Forgets the will: it is not published when the connection closes. */
  discardWill(): void;
}

/** Carries out `o` on `site`. Synchronous; returns undefined so dispatchers can return it. */
export function act(ctx: WireContext, site: WireSite, o: Outcome): undefined {
  switch (o.kind) {
    case "connack":
      if (o.code !== ConnackCode.ACCEPTED) countRefusal(ctx, site, o);
      // Session present only when a stored session was resumed [MQTT-3.2.2-1..3].
      site.outbox.push(
        site.speaks5 || o.format5
          ? encodeConnackOf5(o)
          : encodeConnack(o.sessionPresent === true, o.code),
      );
      if (o.code !== ConnackCode.ACCEPTED) site.closeAfterFlush(o.reason);
      return;
    case "suback":
      site.outbox.push(
        site.speaks5 ? encodeSuback5(o.packetId, o.codes) : encodeSuback(o.packetId, o.codes),
      );
      o.after?.();
      return;
    case "unsuback":
      site.outbox.push(
        site.speaks5 && o.codes ? encodeUnsuback5(o.packetId, o.codes) : encodeUnsuback(o.packetId),
      );
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

/** An MQTT 5 CONNACK: the reason code, the properties, a reason string on a refusal. */
function encodeConnackOf5(o: ConnackOutcome): Uint8Array {
  const present = o.sessionPresent === true;
  const code = connackReason5(o);
  const props = o.properties5 ?? new PropertyWriter();
  if (o.code === ConnackCode.ACCEPTED) return encodeConnack5(present, code, props);
  const full = encodeConnack5(present, code, props.string(Prop.REASON_STRING, o.reason));
  // [MQTT-3.1.2-25] the reason string is left out when it would pass the client's limit.
  if (full.length <= (o.maxPacketSize5 ?? Infinity)) return full;
  return encodeConnack5(present, code, new PropertyWriter());
}

/** Counters and the refusal log's line of a refused CONNECT. */
function countRefusal(ctx: WireContext, site: WireSite, o: ConnackOutcome): void {
  // CONNACK 1 is decided by the decoder's protocol check, before any login: it has its own
  // counter label.
  if (o.code === ConnackCode.UNACCEPTABLE_PROTOCOL_VERSION) {
    ctx.metrics.connectionsRefused.inc({ reason: "protocol_version" });
  } else {
    ctx.metrics.connectionsRefused.inc({ reason: `connack_${o.code}` });
  }
  if (o.code === ConnackCode.BAD_USERNAME_OR_PASSWORD || o.code === ConnackCode.NOT_AUTHORIZED) {
    ctx.metrics.authFailures.inc();
  }
  const connack = site.speaks5 || o.format5 ? connackReason5(o) : o.code; // the code sent
  ctx.refusalLog.refuse(site.remoteAddress, site.listener, o.reason, { connack, ...o.logFields });
}

/**
 * What a closing connection tells its client last: an MQTT 5 DISCONNECT with the reason once
 * connected, a CONNACK refusal for a malformed MQTT 5 CONNECT [MQTT-4.13.1], else nothing.
 */
export function lastWord(
  v5: V5Session | null,
  inConnect: boolean,
  reasonCode: number,
  reason: string,
  serverReference?: string,
): Uint8Array | null {
  if (v5 !== null) {
    return encodeDisconnect5(reasonCode, reason, v5.maximumPacketSize, serverReference);
  }
  return inConnect ? encodeRefusal5(reasonCode) : null;
}
