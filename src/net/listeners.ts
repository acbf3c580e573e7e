/**
 * The only code that touches Deno sockets for MQTT: TCP and TLS listeners that hand every
 * accepted connection to the gateway as a {@link Transport}.
 *
 * @module
 */
import type { Transport } from "../session/transport.ts";

/** A bound MQTT listener. */
export interface MqttListener {
  readonly kind: "tcp" | "tls";
  readonly hostname: string;
  readonly port: number;
  /** Stops accepting; open connections are not affected. */
  close(): void;
  /** Swaps the TLS certificate for new handshakes (hot reload); TCP ignores it. */
  reloadTls?(cert: string, key: string): Promise<void>;
}

/** Called for every accepted connection. */
export type AcceptHandler = (t: Transport) => void;

function transportOf(conn: Deno.Conn): Transport {
  const addr = conn.remoteAddr as Deno.NetAddr;
  return {
    remoteAddress: addr.hostname,
    read: (buf) => conn.read(buf),
    write: (bytes) => conn.write(bytes),
    close: () => {
      try {
        conn.close();
      } catch { /* already closed */ }
    },
  };
}

async function acceptLoop(listener: Deno.Listener, onAccept: AcceptHandler): Promise<void> {
  for (;;) {
    let conn: Deno.Conn;
    try {
      conn = await listener.accept();
    } catch (err) {
      if (err instanceof Deno.errors.BadResource || err instanceof Deno.errors.Interrupted) return;
      // Transient accept errors (EMFILE, ECONNABORTED): back off briefly, keep serving.
      await new Promise((r) => setTimeout(r, 50));
      continue;
    }
    try {
      (conn as Deno.TcpConn).setNoDelay(true);
    } catch { /* not all transports support it */ }
    onAccept(transportOf(conn));
  }
}

/** Binds a TCP listener. */
export function listenTcp(hostname: string, port: number, onAccept: AcceptHandler): MqttListener {
  const l = Deno.listen({ hostname, port, transport: "tcp" });
  acceptLoop(l, onAccept);
  const addr = l.addr as Deno.NetAddr;
  return { kind: "tcp", hostname: addr.hostname, port: addr.port, close: () => safeClose(l) };
}

/**
 * Binds a TLS listener. Certificate reload replaces the listener socket on the same port
 * (Deno fixes the certificate per listener); connections already open are not touched.
 */
export function listenTls(
  hostname: string,
  port: number,
  cert: string,
  key: string,
  onAccept: AcceptHandler,
): MqttListener {
  let l = Deno.listenTls({ hostname, port, cert, key, transport: "tcp", alpnProtocols: ["mqtt"] });
  let current = { cert, key };
  const bound = l.addr as Deno.NetAddr;
  acceptLoop(l, onAccept);
  return {
    kind: "tls",
    hostname: bound.hostname,
    port: bound.port,
    close: () => safeClose(l),
    async reloadTls(newCert: string, newKey: string) {
      // Deno fixes the certificate per listener, so the socket is rebound (SO_REUSEPORT is
      // unstable in Deno 2.9, hence close-then-bind, retried while the old socket is released).
      // The new material is proven first on a throwaway loopback listener, so a bad
      // certificate throws here with the old listener untouched; open connections are never
      // touched. If the port cannot be bound again, the old certificate is put back.
      const probe = Deno.listenTls({ hostname: "127.0.0.1", port: 0, cert: newCert, key: newKey });
      safeClose(probe);
      safeClose(l);
      const bind = async (c: { cert: string; key: string }) => {
        for (let attempt = 0;; attempt++) {
          try {
            return Deno.listenTls({
              hostname: bound.hostname,
              port: bound.port,
              ...c,
              transport: "tcp",
              alpnProtocols: ["mqtt"],
            });
          } catch (err) {
            if (!(err instanceof Deno.errors.AddrInUse) || attempt >= 100) throw err;
            await new Promise((r) => setTimeout(r, 10));
          }
        }
      };
      try {
        l = await bind({ cert: newCert, key: newKey });
        current = { cert: newCert, key: newKey };
      } catch (err) {
        l = await bind(current);
        throw err;
      } finally {
        acceptLoop(l, onAccept);
      }
    },
  };
}

function safeClose(l: Deno.Listener): void {
  try {
    l.close();
  } catch { /* already closed */ }
}
