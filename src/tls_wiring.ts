/**
 * The TLS listener's wiring: its files read (start and SIGHUP) and the listener bound. Loaded
 * from a URL built at run time (`gateway.ts`) only when `listeners.tls` or `listeners.wss` is
 * set: `deno run` keeps the source of every module a literal import names, and a gateway
 * without TLS needs none of the TLS listener, client certificate and CRL code.
 *
 * @module
 */
import { readOperatorBytes, readOperatorFile } from "./config/files.ts";
import { OperatorError } from "./config/errors.ts";
import type { GatewayConfig } from "./config/types.ts";
import { parseAddress } from "./config/load.ts";
import type { AcceptHandler, MqttListener, TlsMaterial } from "./net/listeners.ts";
import { listenTls, type TlsRefused } from "./net/tls_listener.ts";
import { parseRevocationList } from "./net/revocation.ts";
import { type ListenerReports, proxyOptions } from "./wiring.ts";

/**
 * Reads the TLS listener's files: certificate, key and, with client certificates on, the
 * client CA and the CRL (start and SIGHUP). A CRL that cannot be parsed is an operator error
 * naming `listeners.tls_crl_file`.
 */
export async function readTlsMaterial(l: GatewayConfig["listeners"]): Promise<TlsMaterial> {
  const cert = await readOperatorFile("listeners.tls_cert_file", l.tls_cert_file);
  const key = await readOperatorFile("listeners.tls_key_file", l.tls_key_file);
  if (l.tls_client_auth === "none") return { cert, key };
  const clientCa = await readOperatorFile("listeners.tls_client_ca_file", l.tls_client_ca_file);
  if (l.tls_crl_file === "") return { cert, key, clientCa, revoked: null };
  const bytes = await readOperatorBytes("listeners.tls_crl_file", l.tls_crl_file);
  try {
    return { cert, key, clientCa, revoked: parseRevocationList(bytes) };
  } catch (err) {
    const msg = `listeners.tls_crl_file "${l.tls_crl_file}" is not a usable CRL (${
      (err as Error).message
    })`;
    throw new OperatorError("invalid_file", msg, { cause: err });
  }
}

/** Binds the TLS listener of `listeners.tls`; refused handshakes are counted and logged. */
export async function bindTls(
  config: GatewayConfig,
  r: ListenerReports,
  accept: AcceptHandler,
): Promise<MqttListener> {
  const l = config.listeners;
  const a = parseAddress("listeners.tls", l.tls);
  const material = await readTlsMaterial(l);
  return await listenTls(a.hostname, a.port, material, {
    handshakeTimeoutMs: config.limits.connect_timeout_ms,
    maxConnections: config.limits.max_connections,
    clientAuth: l.tls_client_auth,
    identity: l.tls_identity,
    onRefused: ({ why, remote, reason }: TlsRefused) => {
      if (why === "timeout") r.metrics.keepAliveExpired.inc();
      else r.metrics.connectionsRefused.inc({ reason: `tls_${why}` });
      r.refusalLog.refuse(remote, "tls", reason);
    },
    onAbandoned: (remote: string) => {
      r.metrics.connectionsRefused.inc({ reason: "tls_handshake" });
      r.logger.limited("debug", "TLS handshake abandoned by the peer", { remote });
    },
    source:
      `listeners.tls_cert_file "${l.tls_cert_file}", listeners.tls_key_file "${l.tls_key_file}"${
        l.tls_client_auth === "none"
          ? ""
          : ` or listeners.tls_client_ca_file "${l.tls_client_ca_file}"`
      }`,
    proxy: proxyOptions(config, r, "tls"),
  }, accept);
}
