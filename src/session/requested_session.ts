/**
 * The session a CONNECT asks for, as `session_request.ts` reads it from the CONNECT and
 * `stored_sessions.ts` keeps it: a type of its own, so that the store does not import the
 * CONNECT side.
 *
 * @module
 */

/** The session a CONNECT asks for. */
export interface SessionRequest {
  /** Keep subscriptions and positions after the connection ends. */
  readonly store: boolean;
  /** A session stored before under this client id is discarded first [MQTT-3.1.2-6]. */
  readonly cleanStart: boolean;
  /** Seconds offline after which the stored session is removed (MQTT 5: the granted interval). */
  readonly expiryS: number;
  /** MQTT 5: `expiryS` is the session's own; else its expiry is `session.expiry_s` as it is now. */
  readonly mqtt5?: boolean;
  /**
   * Only an existing stored session is resumed; without one the session is clean (no record,
   * no `max_stored_sessions` slot): MQTT 5 Clean Start 0 with expiry 0.
   */
  readonly resumeOnly?: boolean;
}
