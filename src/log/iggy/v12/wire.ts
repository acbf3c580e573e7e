/**
 * Numbers of binary protocol 0.12 (Iggy server 0.10) that 0.11 does not have:
 * the version, the new command codes, the request-header tail and the new error codes.
 *
 * @module
 */

import { packVersion, type ProtocolVersion } from "../version.ts";

/** The 0.12 protocol this client implements (the official codec declares 0.12.2). */
export const PROTOCOL_012: ProtocolVersion = Object.freeze({ major: 0, minor: 12, patch: 2 });
/** Packed 0.12.2 = 0x3002. */
export const PROTOCOL_012_PACKED: number = packVersion(PROTOCOL_012);

/** Command codes new in 0.12. */
export const Code012 = Object.freeze({
  BIND_SESSION: 15,
  GET_PARTITION_ROUTE: 105,
  POLL_MESSAGES_DEFERRED: 106,
  CANCEL_DEFERRED_REQUEST: 108,
});

/** Request-header fields of 0.12 in the 0.11 reserved tail. */
export const RequestOffset012 = Object.freeze({
  REQUEST_CHECKSUM: 144,
  PARTITION_INCARNATION: 200,
  OWNER_GENERATION: 208,
  MINIMUM_METADATA_OP: 216,
});

/** Reply-header fields new in 0.12. */
export const ReplyOffset012 = Object.freeze({ COMMITTED: 220, PARTITION_INCARNATION: 224 });

/** IggyError codes new in 0.12 that the client acts on. */
export const Status012 = Object.freeze({
  REQUEST_TOO_OLD: 85,
  HISTORY_UNAVAILABLE: 87,
  LIFECYCLE_BUSY: 88,
  NOT_PRIMARY: 89,
  DEFERRED_POLL_CAPACITY_EXCEEDED: 90,
  PRODUCER_SEQUENCE_OUT_OF_ORDER: 92,
  PRODUCER_EPOCH_FENCED: 93,
  PRODUCER_UNKNOWN: 94,
  PRODUCER_PARTITION_REQUIRED: 95,
});

/** Most requests one 0.12 connection holds in flight (the server's `client_queue_capacity`). */
export const MAX_PENDING_PER_CONNECTION = 256;
