/**
 * Numbers of the Iggy wire: command codes, operation bytes,
 * frame kinds, status codes and eviction reasons, and the typed errors they turn into.
 *
 * @module
 */

import { formatVersion, PROTOCOL_VERSION } from "./version.ts";

/** Command codes of the commands this client uses (user and PAT admin: tests only). */
export const Code = Object.freeze({
  PING: 1,
  GET_USER: 31,
  CREATE_USER: 33,
  DELETE_USER: 34,
  LOGIN_REGISTER: 40,
  CREATE_PAT: 42,
  DELETE_PAT: 43,
  LOGIN_REGISTER_WITH_PAT: 45,
  POLL_MESSAGES: 100,
  SEND_MESSAGES: 101,
  GET_CONSUMER_OFFSET: 120,
  STORE_CONSUMER_OFFSET: 121,
  DELETE_CONSUMER_OFFSET: 122,
  GET_STREAM: 200,
  GET_STREAMS: 201,
  CREATE_STREAM: 202,
  DELETE_STREAM: 203,
  GET_TOPIC: 300,
  CREATE_TOPIC: 302,
  GET_CONSUMER_GROUP: 600,
  CREATE_CONSUMER_GROUP: 602,
  JOIN_CONSUMER_GROUP: 604,
  LEAVE_CONSUMER_GROUP: 605,
  SYNC_CONSUMER_GROUP: 606,
});

/** Operation byte of a request header (`consensus/operation.rs`). */
export const Operation = Object.freeze({
  REGISTER: 1,
  NON_REPLICATED: 2,
  LOGOUT: 3,
  CREATE_STREAM: 128,
  DELETE_STREAM: 130,
  CREATE_TOPIC: 132,
  CREATE_USER: 141,
  DELETE_USER: 143,
  CREATE_PAT: 146,
  DELETE_PAT: 147,
  CREATE_CONSUMER_GROUP: 139,
  JOIN_CONSUMER_GROUP: 148,
  LEAVE_CONSUMER_GROUP: 149,
  SEND_MESSAGES: 160,
  STORE_CONSUMER_OFFSET: 161,
  DELETE_CONSUMER_OFFSET: 162,
});

/** How the request id of an operation is chosen. */
export type OperationClass = "register" | "metadata" | "partition" | "read";

/** Operation byte of each replicated command (`consensus/operation.rs`). */
const OPERATION_OF: ReadonlyMap<number, number> = new Map<number, number>([
  [Code.LOGIN_REGISTER, Operation.REGISTER],
  [Code.LOGIN_REGISTER_WITH_PAT, Operation.REGISTER],
  [Code.CREATE_STREAM, Operation.CREATE_STREAM],
  [Code.DELETE_STREAM, Operation.DELETE_STREAM],
  [Code.CREATE_TOPIC, Operation.CREATE_TOPIC],
  [Code.CREATE_USER, Operation.CREATE_USER],
  [Code.DELETE_USER, Operation.DELETE_USER],
  [Code.CREATE_PAT, Operation.CREATE_PAT],
  [Code.DELETE_PAT, Operation.DELETE_PAT],
  [Code.CREATE_CONSUMER_GROUP, Operation.CREATE_CONSUMER_GROUP],
  [Code.JOIN_CONSUMER_GROUP, Operation.JOIN_CONSUMER_GROUP],
  [Code.LEAVE_CONSUMER_GROUP, Operation.LEAVE_CONSUMER_GROUP],
  [Code.SEND_MESSAGES, Operation.SEND_MESSAGES],
  [Code.STORE_CONSUMER_OFFSET, Operation.STORE_CONSUMER_OFFSET],
  [Code.DELETE_CONSUMER_OFFSET, Operation.DELETE_CONSUMER_OFFSET],
]);

/** Operation byte for a command code; unknown codes go as NonReplicated reads. */
export function operationFor(code: number): number {
  return OPERATION_OF.get(code) ?? Operation.NON_REPLICATED;
}

/** Request-id class of an operation byte. */
export function classOf(operation: number): OperationClass {
  if (operation === Operation.REGISTER) return "register";
  if (operation === Operation.NON_REPLICATED) return "read";
  if (operation >= 160) return "partition";
  return "metadata"; // Logout and 128..149
}

/** True when the reply body starts with a result section. */
export function isResultFramed(operation: number, bodyLength: number): boolean {
  if (operation === Operation.REGISTER) return bodyLength > 0;
  // 64..127 are internal metadata operations the server may echo instead of the request's
  // (a CreateTopic reply comes back as CreateTopicWithAssignments, 64); DeleteSegments (138)
  // is not metadata-plane.
  const metadata = operation >= 64 && operation <= 149 && operation !== 138;
  return metadata || operation === Operation.STORE_CONSUMER_OFFSET ||
    operation === Operation.DELETE_CONSUMER_OFFSET;
}

/** Frame kind byte at header offset 60. */
export const FrameKind = Object.freeze({ REQUEST: 5, REPLY: 8, EVICTION: 13 });

/** IggyError codes the client acts on. */
export const Status = Object.freeze({
  INVALID_COMMAND: 3,
  INVALID_FORMAT: 4,
  RESOURCE_NOT_FOUND: 20,
  STALE_CLIENT: 30,
  UNAUTHENTICATED: 40,
  UNAUTHORIZED: 41,
  INVALID_CREDENTIALS: 42,
  USER_INACTIVE: 47,
  INVALID_PAT: 53,
  TRANSIENT_NOT_COMMITTED: 57,
  TRANSIENT_NOT_ACCEPTED: 58,
  STREAM_NOT_FOUND: 1009,
  STREAM_NAME_NOT_FOUND: 1010,
  STREAM_EXISTS: 1012,
  TOPIC_NOT_FOUND: 2010,
  TOPIC_NAME_NOT_FOUND: 2011,
  TOPIC_EXISTS: 2013,
  PARTITION_NOT_FOUND: 3007,
  CONSUMER_OFFSET_NOT_FOUND: 3021,
  INCOMPATIBLE_PROTOCOL: 14003,
  /**
   * The gateway's own, never Iggy's: a reply larger than the frame bound, read past unkept
   * (`frame_reader.ts`); a poll then asks again for fewer messages.
   */
  REPLY_TOO_LARGE: 0x7fff_0001,
});

/** Eviction reasons (byte 255 of an eviction header). */
export const EvictionReason = Object.freeze({
  NO_SESSION: 1,
  SESSION_TOO_LOW: 7,
  SESSION_RELEASE_MISMATCH: 8,
  INVALID_CREDENTIALS: 9,
  INVALID_TOKEN: 10,
  USER_INACTIVE: 11,
  SESSION_ERROR: 12,
  STALE_CLIENT: 13,
  INCOMPATIBLE_PROTOCOL: 14,
  MALFORMED_LOGIN: 15,
});

/** The server answered with an IggyError code (reply status or result section). */
export class IggyError extends Error {
  /** IggyError code. */
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.name = "IggyError";
    this.code = code;
  }
}

/** The server evicted the session; the connection is dead and must re-register. */
export class IggyEvictionError extends IggyError {
  readonly reason: number;
  readonly serverVersion: number;
  readonly serverVersionMin: number;
  constructor(reason: number, serverVersion: number, serverVersionMin: number) {
    const code = evictionCode(reason);
    super(code, evictionMessage(reason, code, serverVersion, serverVersionMin));
    this.name = "IggyEvictionError";
    this.reason = reason;
    this.serverVersion = serverVersion;
    this.serverVersionMin = serverVersionMin;
  }
}

/** The connection failed, closed, or could not be opened. */
export class IggyConnectionError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "IggyConnectionError";
  }
}

/** An error raised before the request reached the socket: safe to send elsewhere. */
export class NotSentError extends IggyConnectionError {}

/** No reply within the request timeout (the server drops bad frames silently). */
export class IggyTimeoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "IggyTimeoutError";
  }
}

/** What an eviction reason stands for. */
interface EvictionMeaning {
  /** The IggyError code. */
  readonly code: number;
  /** What an eviction that refuses a login says instead of the generic text. */
  readonly refusal?: string;
}

/**
 * The eviction reasons the client knows. SDKs fold UserInactive into Unauthenticated; we keep
 * 47 so principals can say "inactive".
 */
const EVICTION_MEANING: ReadonlyMap<number, EvictionMeaning> = new Map<number, EvictionMeaning>([
  [EvictionReason.NO_SESSION, { code: Status.UNAUTHENTICATED }],
  [EvictionReason.SESSION_TOO_LOW, { code: Status.UNAUTHENTICATED }],
  [EvictionReason.SESSION_RELEASE_MISMATCH, { code: Status.UNAUTHENTICATED }],
  [EvictionReason.SESSION_ERROR, { code: Status.UNAUTHENTICATED }],
  [EvictionReason.STALE_CLIENT, { code: Status.STALE_CLIENT }],
  [EvictionReason.INCOMPATIBLE_PROTOCOL, { code: Status.INCOMPATIBLE_PROTOCOL }],
  [EvictionReason.INVALID_CREDENTIALS, {
    code: Status.INVALID_CREDENTIALS,
    refusal: "Iggy login failed: invalid credentials",
  }],
  [EvictionReason.INVALID_TOKEN, {
    code: Status.INVALID_PAT,
    refusal: "Iggy login failed: invalid personal access token",
  }],
  [EvictionReason.USER_INACTIVE, {
    code: Status.USER_INACTIVE,
    refusal: "Iggy login failed: user is inactive",
  }],
  [EvictionReason.MALFORMED_LOGIN, {
    code: Status.INVALID_FORMAT,
    refusal: "Iggy rejected the login frame as malformed",
  }],
]);

/** Error code an eviction reason stands for; an unknown reason is InvalidCommand. */
export function evictionCode(reason: number): number {
  return EVICTION_MEANING.get(reason)?.code ?? Status.INVALID_COMMAND;
}

function evictionMessage(reason: number, code: number, server: number, min: number): string {
  if (reason === EvictionReason.INCOMPATIBLE_PROTOCOL) {
    return `Iggy server speaks binary protocol ${formatVersion(server)} ` +
      `(accepts ${formatVersion(min)}..${formatVersion(server)}), but this gateway speaks ` +
      `${formatVersion(PROTOCOL_VERSION)}: upgrade the gateway or use an Iggy server of the ` +
      `matching version`;
  }
  return EVICTION_MEANING.get(reason)?.refusal ??
    `Iggy evicted the session (reason ${reason}, error ${code})`;
}

/** True for the codes that mean "stream, topic or partition does not exist". */
export function isNotFound(code: number): boolean {
  return code === Status.RESOURCE_NOT_FOUND || code === Status.STREAM_NOT_FOUND ||
    code === Status.STREAM_NAME_NOT_FOUND || code === Status.TOPIC_NOT_FOUND ||
    code === Status.TOPIC_NAME_NOT_FOUND || code === Status.PARTITION_NOT_FOUND;
}
