/**
 * An MQTT.js connection attempt over TLS with a client certificate (or none), trusting the
 * test server certificate (tests/fixtures/tls), and how it ended.
 *
 * @module
 */
import mqtt from "mqtt";
import type { IssuedCertificate } from "./client_pki.ts";

const SERVER_CA = new URL("../fixtures/tls/server.crt", import.meta.url).pathname;

/** How an attempt ended: the client, and null when it got CONNACK 0, else its error. */
export interface TlsAttempt {
  readonly client: mqtt.MqttClient;
  /**
   * A refused CONNACK carries `code`; "closed": the server ended the connection without a
   * CONNACK (under TLS 1.3 a client certificate is judged after the client's side of the
   * handshake is done, so the client sees a close, not a handshake error).
   */
  readonly error: { code?: number; message: string } | null;
}

/** Connects to `port` with `cert` (null: no certificate); resolves once the attempt ended. */
export async function tlsAttempt(
  port: number,
  cert: IssuedCertificate | null,
  o: mqtt.IClientOptions = {},
): Promise<TlsAttempt> {
  const client = mqtt.connect(`mqtts://localhost:${port}`, {
    ca: await Deno.readTextFile(SERVER_CA),
    ...(cert === null ? {} : {
      cert: await Deno.readTextFile(cert.crt),
      key: await Deno.readTextFile(cert.key),
    }),
    reconnectPeriod: 0,
    connectTimeout: 5000,
    ...o,
  });
  const error = await new Promise<TlsAttempt["error"]>((resolve) => {
    client.once("connect", () => resolve(null));
    client.once("error", (e) => resolve(e as { code?: number; message: string }));
    client.once("close", () => resolve({ message: "closed" }));
  });
  return { client, error };
}
