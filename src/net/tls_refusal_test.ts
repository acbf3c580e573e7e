import assert from "node:assert/strict";
import { handshakeFailure, TlsReason, whyUnverified } from "./tls_refusal.ts";

/** What Deno's node:tls (2.9) reported in `tlsClientError` for each client, and the reason. */
const HANDSHAKE_ERRORS: [string, string | undefined, string, boolean][] = [
  // [message, code, reason, refused]
  [
    "peer is incompatible: SignatureAlgorithmsExtensionRequired",
    "ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE",
    TlsReason.PROTOCOL_VERSION, // openssl s_client -tls1_1, -tls1
    true,
  ],
  [
    "received corrupt message of type InvalidContentType (SSL routines:ssl3_get_record:wrong version number)",
    "ERR_SSL_WRONG_VERSION_NUMBER",
    TlsReason.NOT_TLS, // an HTTP request or plain MQTT on the TLS port
    true,
  ],
  [
    "received fatal alert: UnknownCA",
    "ERR_SSL_TLSV1_ALERT_UNKNOWN_CA",
    "the client does not trust the gateway's certificate (UnknownCA)",
    true,
  ],
  [
    "peer sent no certificates",
    "ERR_SSL_PEER_DID_NOT_RETURN_A_CERTIFICATE",
    "no client certificate",
    true,
  ],
  ["socket hang up", "ECONNRESET", "closed by the peer during the handshake", false],
  ["TLS handshake timeout", undefined, TlsReason.TIMEOUT, true],
  ["something new", undefined, "something new", true],
];

Deno.test("handshakeFailure() maps what node:tls reports to a short stable reason, else keeps its message", () => {
  for (const [message, code, reason, refused] of HANDSHAKE_ERRORS) {
    const err = Object.assign(new Error(message), code === undefined ? {} : { code });
    assert.deepEqual(handshakeFailure(err), { reason, refused }, message);
  }
});

Deno.test("whyUnverified() keeps the stack's word for bytes that are no certificate", () => {
  const reason = whyUnverified(new Uint8Array([0x30, 0x03, 0x02, 0x01]), new Set(), 0, "X");
  assert.equal(reason, "certificate not verified (X; not a readable certificate)");
});
