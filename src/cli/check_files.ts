/**
 * `check`: the files the config names that `run` will read, read as `run` reads them (under
 * the same permission set) and parsed: the TLS listener's certificate chain and key, and that
 * they are a pair the TLS stack takes; with client certificates on, the client CA and the CRL;
 * in Iggy mode and forward mode with `iggy.tls`, the CA file for Iggy's certificate; the JWK set
 * of login tokens, every key imported. (The topic
 * map is compiled before this.) A file named by a key `run` will not use is not read: what
 * `check` refuses, `run` refuses too. The first problem throws an {@link OperatorError} whose
 * one-line message names the key and the file.
 *
 * @module
 */
import { OperatorError } from "../config/errors.ts";
import { readOperatorBytes, readOperatorFile } from "../config/files.ts";
import type { GatewayConfig } from "../config/types.ts";
import { parseRevocationList } from "../net/revocation.ts";
import { readJwtKeys } from "../config/jwt_keys_file.ts";
import { proveTlsMaterial } from "../net/tls_listener.ts";

/**
 * What this module uses of node:crypto, declared here: a type import of node:crypto, too, would
 * have `deno run` load it at start, for every command (RSS `run` would carry for nothing).
 */
interface Crypto {
  readonly X509Certificate: new (pem: string) => X509Certificate;
  createPrivateKey(pem: string): unknown;
}

/** One parsed certificate (node:crypto's `X509Certificate`, the parts used here). */
interface X509Certificate {
  readonly subject: string;
  readonly validToDate: Date;
  checkPrivateKey(key: unknown): boolean;
}

/** One line per file checked; none when the config names no file `run` will read. */
export async function configFileLines(config: GatewayConfig): Promise<string[]> {
  const l = config.listeners;
  const lines: string[] = [];
  // Loaded only here: node:crypto's modules are RSS `run` would carry for nothing.
  const crypto: Crypto = await import("node:crypto");
  if (l.tls !== "" || l.wss !== "") lines.push(...await listenerPair(crypto, l));
  if (l.tls !== "" && l.tls_client_auth !== "none") {
    const ca = await certificates(crypto, "listeners.tls_client_ca_file", l.tls_client_ca_file);
    lines.push(`listeners.tls_client_ca_file "${l.tls_client_ca_file}": ${describeCa(ca)}`);
    if (l.tls_crl_file !== "") lines.push(await revocationLine(l.tls_crl_file));
  }
  const i = config.iggy;
  const usesIggy = config.gateway.backend === "iggy" || config.forward.enabled;
  if (usesIggy && i.tls && i.tls_ca_file !== "") {
    const ca = await certificates(crypto, "iggy.tls_ca_file", i.tls_ca_file);
    lines.push(`iggy.tls_ca_file "${i.tls_ca_file}": ${describeCa(ca)}`);
  }
  if (config.auth.jwt_jwks_file !== "") lines.push(await jwksLine(config.auth));
  return lines;
}

/** The login tokens' key set: it parses and every key imports, as at start. */
async function jwksLine(auth: GatewayConfig["auth"]): Promise<string> {
  const { keys } = (await readJwtKeys({ ...auth, jwt_hmac_secret: "" }))!;
  const names = keys.map((k) => k.kid === "" ? k.alg : `${k.alg} "${k.kid}"`);
  return `auth.jwt_jwks_file "${auth.jwt_jwks_file}": ${keys.length} key(s): ${names.join(", ")}`;
}

/** The listener's certificate chain and key: both parse, the key is the first certificate's. */
async function listenerPair(
  crypto: Crypto,
  l: GatewayConfig["listeners"],
): Promise<string[]> {
  const { text: cert, chain } = await certificates(
    crypto,
    "listeners.tls_cert_file",
    l.tls_cert_file,
  );
  const keyText = await readOperatorFile("listeners.tls_key_file", l.tls_key_file);
  let key;
  try {
    key = crypto.createPrivateKey(keyText);
  } catch (err) {
    throw invalid("listeners.tls_key_file", l.tls_key_file, "is not a usable PEM private key", err);
  }
  const leaf = chain[0];
  if (!leaf.checkPrivateKey(key)) {
    throw new OperatorError(
      "invalid_file",
      `listeners.tls_key_file "${l.tls_key_file}" is not the key of the certificate (${
        nameOf(leaf)
      }) in listeners.tls_cert_file "${l.tls_cert_file}"`,
    );
  }
  try {
    proveTlsMaterial({ cert, key: keyText }); // what `run` does before it binds
  } catch (err) {
    throw invalid(
      "listeners.tls_cert_file",
      l.tls_cert_file,
      `and listeners.tls_key_file "${l.tls_key_file}" are refused by the TLS stack`,
      err,
    );
  }
  const lines = [
    `listeners.tls_cert_file "${l.tls_cert_file}": ${chain.length} certificate(s), ${
      nameOf(leaf)
    }, valid until ${leaf.validToDate.toISOString()}; listeners.tls_key_file "${l.tls_key_file}" is its key`,
  ];
  const expired = chain.filter((c) => c.validToDate.getTime() < Date.now());
  for (const c of expired) {
    lines.push(
      `WARNING listeners.tls_cert_file "${l.tls_cert_file}": certificate ${
        nameOf(c)
      } expired on ${c.validToDate.toISOString()}; clients will refuse it`,
    );
  }
  return lines;
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/** The file `key` names and its PEM certificates: at least one, each one parsed. */
async function certificates(
  crypto: Crypto,
  key: string,
  path: string,
): Promise<{ text: string; chain: X509Certificate[] }> {
  const text = await readOperatorFile(key, path);
  const blocks = text.match(PEM_CERTIFICATE) ?? [];
  if (blocks.length === 0) {
    throw new OperatorError("invalid_file", `${key} "${path}" holds no PEM certificate`);
  }
  const chain = blocks.map((pem, i) => {
    try {
      return new crypto.X509Certificate(pem);
    } catch (err) {
      const which = blocks.length === 1
        ? "its certificate"
        : `certificate ${i + 1} of ${blocks.length}`;
      throw invalid(key, path, `holds no usable PEM certificate: ${which} does not parse`, err);
    }
  });
  return { text, chain };
}

/** A certificate's subject on one line (`CN=a, O=b`). */
function nameOf(c: X509Certificate): string {
  return c.subject.replaceAll("\n", ", ");
}

function describeCa({ chain }: { chain: X509Certificate[] }): string {
  return `${chain.length} certificate(s): ${chain.map(nameOf).join("; ")}`;
}

/** The CRL, parsed as `run` parses it. */
async function revocationLine(path: string): Promise<string> {
  const bytes = await readOperatorBytes("listeners.tls_crl_file", path);
  try {
    return `listeners.tls_crl_file "${path}": ${parseRevocationList(bytes).size} revoked serial(s)`;
  } catch (err) {
    throw invalid("listeners.tls_crl_file", path, "is not a usable CRL", err);
  }
}

function invalid(key: string, path: string, what: string, err: unknown): OperatorError {
  const reason = err instanceof Error ? err.message : String(err);
  return new OperatorError("invalid_file", `${key} "${path}" ${what} (${reason})`, { cause: err });
}
