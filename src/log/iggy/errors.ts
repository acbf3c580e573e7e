/**
 * The one place where Iggy client errors become the port's {@link BackendError} codes:
 * not found → `not_found`, 41 → `unauthorized`, closed/refused/evicted → `unavailable`,
 * no reply in time → `timeout`, a request the server or the encoder rejects → `invalid`.
 *
 * @module
 */

import { BackendError, type BackendErrorCode } from "../port.ts";
import { DecodeError } from "./bytes.ts";
import {
  IggyConnectionError,
  IggyError,
  IggyEvictionError,
  IggyTimeoutError,
  isNotFound,
  Status,
} from "./codes.ts";
import { EncodeError } from "./encoding.ts";

/**
 * What refused a login to Iggy: the username and password, the personal access token, the user
 * (inactive), the protocol version.
 */
export type LoginRefusal = "credentials" | "token" | "user_inactive" | "protocol";

/** Port error code for an Iggy error code. */
export function backendCodeFor(code: number): BackendErrorCode {
  if (isNotFound(code)) return "not_found";
  switch (code) {
    case Status.UNAUTHORIZED:
      return "unauthorized";
    case Status.TRANSIENT_NOT_COMMITTED:
      return "timeout"; // outcome unknown, like a lost reply: the caller decides

    case Status.UNAUTHENTICATED:
    case Status.STALE_CLIENT:
    case Status.INVALID_CREDENTIALS:
    case Status.INVALID_PAT:
    case Status.USER_INACTIVE:
    case Status.TRANSIENT_NOT_ACCEPTED:
    case Status.INCOMPATIBLE_PROTOCOL:
      return "unavailable"; // the service session is gone or refused: retry after reconnect
    default:
      return "invalid";
  }
}

/** Wraps any error of this client as a BackendError; `action` says what failed. */
export function toBackendError(e: unknown, action: string): BackendError {
  if (e instanceof BackendError) return e;
  const reason = e instanceof Error ? e.message : String(e);
  const message = `Cannot ${action}: ${reason}`;
  if (e instanceof IggyEvictionError) return new BackendError("unavailable", message, { cause: e });
  if (e instanceof IggyError) {
    return new BackendError(backendCodeFor(e.code), message, { cause: e });
  }
  if (e instanceof IggyTimeoutError) return new BackendError("timeout", message, { cause: e });
  if (e instanceof IggyConnectionError) {
    return new BackendError("unavailable", message, { cause: e });
  }
  if (e instanceof EncodeError || e instanceof RangeError) {
    return new BackendError("invalid", message, { cause: e });
  }
  if (e instanceof DecodeError) return new BackendError("unavailable", message, { cause: e });
  return new BackendError("unavailable", message, { cause: e });
}

/**
 * What refused a login, read from an error of `IggyBackend.open()` (through its `cause`
 * chain): the username and password, the personal access token, the user (inactive), the
 * protocol version; null for anything else (unreachable, no reply in time).
 */
export function loginRefusalOf(e: unknown): LoginRefusal | null {
  for (let c: unknown = e; c instanceof Error; c = c.cause) {
    if (!(c instanceof IggyError)) continue;
    // 43 and 44 are Iggy's InvalidUsername and InvalidPassword, 54 an expired token.
    switch (c.code) {
      case Status.INVALID_CREDENTIALS:
      case 43:
      case 44:
        return "credentials";
      case Status.INVALID_PAT:
      case 54:
        return "token";
      case Status.USER_INACTIVE:
        return "user_inactive";
      case Status.INCOMPATIBLE_PROTOCOL:
        return "protocol";
    }
  }
  return null;
}
