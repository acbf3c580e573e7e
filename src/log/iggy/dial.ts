/**
 * Opens the TCP or TLS byte stream to Iggy. The only file of this folder that touches
 * `Deno.*` sockets, so the connection logic runs over in-memory streams in tests.
 *
 * @module
 */

import { type HostPort, splitHostPort } from "../../base/address.ts";
import type { GatewayConfig } from "../../config/types.ts";
import { IggyConnectionError, IggyTimeoutError } from "./codes.ts";
import type { Logger } from "../../observe/logger.ts";

/** A bidirectional byte stream. */
export interface Transport {
  /** Bytes from the server. */
  readonly readable: ReadableStream<Uint8Array>;
  /** Bytes to the server. */
  readonly writable: WritableStream<Uint8Array>;
  /**
   * Direct socket I/O (a Deno socket has both), used instead of the streams when present:
   * reads into the caller's buffer (`frame_reader.ts`) and writes without a stream's promises
   * (`frame_writer.ts`). `read` resolves with the bytes read, null at end of stream; `write`
   * with the bytes written (maybe fewer than given).
   */
  read?(into: Uint8Array): Promise<number | null>;
  write?(bytes: Uint8Array): Promise<number>;
  /** Closes both directions; idempotent. */
  close(): void;
}

/** Opens a new transport; rejects with {@link IggyConnectionError} or {@link IggyTimeoutError}. */
export type Dialer = () => Promise<Transport>;

/** Where and how to connect. */
export interface DialOptions {
  /** `host:port`, `[v6]:port`. */
  readonly address: string;
  readonly tls: boolean;
  /** PEM file with extra CA certificates ("" = system roots). */
  readonly tlsCaFile: string;
  /** Name to verify the certificate against ("" = the address host). */
  readonly tlsServerName: string;
  readonly connectTimeoutMs: number;
}

/** Splits `host:port` / `[v6]:port` (`base/address.ts`); a port to dial is 1..65535. */
export function parseAddress(address: string): HostPort {
  const split = splitHostPort(address);
  if (split === null || split.port < 1 || split.port > 65535) {
    throw new IggyConnectionError(`Invalid Iggy address "${address}": expected host:port`);
  }
  return split;
}

function describeConnectError(address: string, e: unknown): string {
  if (e instanceof Deno.errors.ConnectionRefused) return "connection refused";
  if (e instanceof Deno.errors.NotFound) return "host not found";
  if (e instanceof Deno.errors.ConnectionReset) return "connection reset";
  const msg = e instanceof Error ? e.message : String(e);
  return msg.replace(address, "").trim() || "connect failed";
}

/** A dialer for a real Iggy server. */
export function tcpDialer(options: DialOptions): Dialer {
  const { hostname, port } = parseAddress(options.address);
  let caCerts: string[] | undefined;
  return async () => {
    if (options.tls && options.tlsCaFile && !caCerts) {
      caCerts = [await Deno.readTextFile(options.tlsCaFile)];
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const connecting = Deno.connect({ hostname, port, transport: "tcp" });
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        connecting.then((c) => c.close(), () => {});
        reject(
          new IggyTimeoutError(
            `Iggy at ${options.address} unreachable: no TCP connection within ${options.connectTimeoutMs} ms`,
          ),
        );
      }, options.connectTimeoutMs);
    });
    try {
      const tcp = await Promise.race([connecting, timeout]);
      tcp.setNoDelay(true);
      if (!options.tls) return tcp;
      return await Deno.startTls(tcp, {
        hostname: options.tlsServerName || hostname,
        caCerts,
      });
    } catch (e) {
      if (e instanceof IggyTimeoutError) throw e;
      throw new IggyConnectionError(
        `Iggy at ${options.address} unreachable: ${describeConnectError(options.address, e)}`,
        { cause: e },
      );
    } finally {
      clearTimeout(timer);
    }
  };
}

/** One TCP/TLS dialer per node of `config.address` (comma-separated `host:port`s). */
export function clusterDialers(
  config: Pick<
    GatewayConfig["iggy"],
    "address" | "tls" | "tls_ca_file" | "tls_server_name" | "request_timeout_ms"
  >,
): Dialer[] {
  return config.address.split(",").map((a) =>
    tcpDialer({
      address: a.trim(),
      tls: config.tls,
      tlsCaFile: config.tls_ca_file,
      tlsServerName: config.tls_server_name,
      connectTimeoutMs: config.request_timeout_ms,
    })
  );
}

/** Injection points for tests. */
export interface IggyBackendDeps {
  /** Opens the byte stream to Iggy (default: TCP/TLS to `config.address`). */
  readonly dial?: Dialer;
  /** One dialer per cluster node (tests); wins over `dial`. */
  readonly dials?: readonly Dialer[];
  /** Jitter source for reconnect back-off, in [0, 1) (default Math.random). */
  readonly random?: () => number;
  /** Where the client's warnings go (a fenced 0.12 producer). */
  readonly logger?: Logger;
  /** Largest message the gateway appends (`limits.max_packet_bytes`): bounds a poll's count. */
  readonly maxMessageBytes?: number;
}
