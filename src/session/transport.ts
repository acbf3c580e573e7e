/**
 * What a connection needs of its byte transport, push-style: the transport calls the
 * connection's {@link TransportSink} with each chunk that arrives, and the connection pauses
 * and resumes it for back-pressure. Push, not pull, because memory per idle connection is a
 * benchmark floor: a socket with a pending `read()` promise costs more memory than one that is
 * only watched for readability.
 * `node:net` and `node:tls` sockets are driven this way directly. The session logic never
 * touches a socket API.
 *
 * @module
 */

/** Receives what a transport reads. */
export interface TransportSink {
  /** Bytes read. The chunk is only valid during the call (the transport may reuse it). */
  data(chunk: Uint8Array): void;
  /** End of stream or a read error; called at most once, after which data() is not called. */
  end(error?: unknown): void;
}

/** A bidirectional byte stream. */
export interface Transport {
  /** Source IP of the peer, for anonymous rules and logs. */
  readonly remoteAddress: string;
  /**
   * When the socket was accepted (`performance.now()`), if before the transport was made (a
   * TLS handshake came first): the connect deadline runs from then.
   */
  readonly acceptedAt?: number;
  /**
   * The name a verified client certificate gives the peer (`listeners.tls_identity`); "" when
   * the certificate carries no such name; absent when the peer presented no certificate.
   */
  readonly certificateName?: string;
  /** Which listener accepted it (`tcp`, `tls`, `ws`, `wss`), for log lines; absent: `tcp`. */
  readonly listener?: string;
  /** Starts delivering reads to `sink`; called once. */
  start(sink: TransportSink): void;
  /** Stops delivering reads until resume() (the peer's TCP window then fills). */
  pause(): void;
  /** Delivers reads again after pause(). */
  resume(): void;
  /** Writes some prefix of `bytes`; resolves with how many were written. */
  write(bytes: Uint8Array): Promise<number>;
  /** Closes both directions. Must not throw when already closed. */
  close(): void;
}

/** How long a connection closed with a DISCONNECT (or refusing CONNACK) reads on (ms). */
export const LINGER_MS = 500;

/** Closes `t`, which may be closed already. */
export function closeQuietly(t: Transport): void {
  try {
    t.close();
  } catch { /* already closed */ }
}

/**
 * Reads on (the connection drops what comes) until the peer closes or {@link LINGER_MS} pass:
 * a socket closed with unread input resets the connection, and the peer may lose the last
 * packet written to it.
 */
export function lingerThenClose(t: Transport): void {
  t.resume();
  setTimeout(closeQuietly, LINGER_MS, t);
}
