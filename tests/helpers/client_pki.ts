/**
 * A throwaway device PKI made with the `openssl` command, as a fleet operator would make one:
 * a device CA, certificates it signs (valid, expired, revoked), a CRL, and a second CA that
 * signs a certificate with the same name (the forgery a gateway must refuse). Everything lives
 * in one temporary directory under `config/` (the only place the gateway's permission set may
 * read an operator's files), removed by {@link ClientPki.remove}.
 *
 * @module
 */
import { ROOT } from "./cli.ts";
import { run } from "./gateway.ts";

/** A certificate and its key, as file paths. */
export interface IssuedCertificate {
  readonly crt: string;
  readonly key: string;
}

/** What a test asks a CA to sign. */
export interface CertificateRequest {
  /** The subject CN. */
  readonly cn: string;
  /** Subject alternative names, e.g. `DNS:sensor-7.example`. */
  readonly san?: readonly string[];
  /** Valid from / to, as `YYYYMMDDHHMMSSZ`; default: from now for two days. */
  readonly startDate?: string;
  readonly endDate?: string;
}

/** One certificate authority in its own directory (an `openssl ca` database). */
export class TestCa {
  readonly dir: string;
  readonly crt: string;
  #serial = 0;

  private constructor(dir: string) {
    this.dir = dir;
    this.crt = `${dir}/ca.crt`;
  }

  /** A new self-signed CA named `cn` under `dir`. */
  static async create(dir: string, cn: string): Promise<TestCa> {
    await Deno.mkdir(`${dir}/issued`, { recursive: true });
    await Deno.writeTextFile(`${dir}/index.txt`, "");
    await Deno.writeTextFile(`${dir}/serial`, "1000\n");
    await Deno.writeTextFile(`${dir}/crlnumber`, "1000\n");
    await Deno.writeTextFile(`${dir}/ca.cnf`, caConfig(dir));
    await openssl([
      ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"],
      ...["-keyout", `${dir}/ca.key`, "-out", `${dir}/ca.crt`, "-days", "2", "-subj", `/CN=${cn}`],
      ...["-addext", "basicConstraints=critical,CA:TRUE"],
      ...["-addext", "keyUsage=critical,keyCertSign,cRLSign"],
    ]);
    return new TestCa(dir);
  }

  /** Signs a new client certificate for `req`. */
  async issue(req: CertificateRequest): Promise<IssuedCertificate> {
    const base = `${this.dir}/issued/${++this.#serial}`;
    const san = req.san === undefined ? [] : ["-addext", `subjectAltName=${req.san.join(",")}`];
    await openssl([
      ...["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"],
      ...["-keyout", `${base}.key`, "-out", `${base}.csr`, "-subj", `/CN=${req.cn}`, ...san],
    ]);
    const validity = req.startDate !== undefined && req.endDate !== undefined
      ? ["-startdate", req.startDate, "-enddate", req.endDate]
      : ["-days", "2"];
    await openssl([
      ...["ca", "-batch", "-notext", "-config", `${this.dir}/ca.cnf`, ...validity],
      ...["-in", `${base}.csr`, "-out", `${base}.crt`],
    ]);
    return { crt: `${base}.crt`, key: `${base}.key` };
  }

  /**
   * Signs an X.509 v1 certificate for `cn` (no extensions: `openssl x509 -req` without an
   * extension file makes v1), as old device firmware and some tutorials still do.
   */
  async issueV1(cn: string): Promise<IssuedCertificate> {
    const base = `${this.dir}/issued/${++this.#serial}`;
    await openssl([
      ...["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"],
      ...["-keyout", `${base}.key`, "-out", `${base}.csr`, "-subj", `/CN=${cn}`],
    ]);
    await openssl([
      ...["x509", "-req", "-in", `${base}.csr`, "-CA", this.crt, "-CAkey", `${this.dir}/ca.key`],
      ...["-set_serial", String(0x7000 + this.#serial), "-days", "2", "-out", `${base}.crt`],
    ]);
    return { crt: `${base}.crt`, key: `${base}.key` };
  }

  /** Revokes `cert` and writes the CA's CRL to `ca.crl` (returned). */
  async revoke(cert: IssuedCertificate): Promise<string> {
    await openssl(["ca", "-batch", "-config", `${this.dir}/ca.cnf`, "-revoke", cert.crt]);
    return this.writeCrl();
  }

  /** Writes the CA's current CRL to `ca.crl`. */
  async writeCrl(): Promise<string> {
    const crl = `${this.dir}/ca.crl`;
    await openssl(["ca", "-batch", "-config", `${this.dir}/ca.cnf`, "-gencrl", "-out", crl]);
    return crl;
  }
}

/** The device CA and a second, foreign CA, in one directory under `config/`. */
export interface ClientPki {
  readonly dir: string;
  readonly deviceCa: TestCa;
  readonly foreignCa: TestCa;
  remove(): Promise<void>;
}

/** True when the `openssl` command can be run (the tests that need it skip loudly without). */
export async function hasOpenssl(): Promise<boolean> {
  try {
    return (await new Deno.Command("openssl", { args: ["version"] }).output()).success;
  } catch {
    return false;
  }
}

/** Makes a device CA and a foreign CA under `config/`. */
export async function makeClientPki(): Promise<ClientPki> {
  const dir = await Deno.makeTempDir({ dir: `${ROOT}config`, prefix: ".test-pki-" });
  const deviceCa = await TestCa.create(`${dir}/device-ca`, "Test Device CA");
  const foreignCa = await TestCa.create(`${dir}/foreign-ca`, "Some Other CA");
  return { dir, deviceCa, foreignCa, remove: () => Deno.remove(dir, { recursive: true }) };
}

async function openssl(args: string[]): Promise<void> {
  const r = await run("openssl", args);
  if (r.code !== 0) throw new Error(`openssl ${args[0]} failed: ${r.stderr}`);
}

/** A minimal `openssl ca` configuration: client certificates, CN as supplied, SANs copied. */
function caConfig(dir: string): string {
  return `[ ca ]
default_ca = test_ca

[ test_ca ]
database = ${dir}/index.txt
new_certs_dir = ${dir}/issued
certificate = ${dir}/ca.crt
private_key = ${dir}/ca.key
serial = ${dir}/serial
crlnumber = ${dir}/crlnumber
default_md = sha256
default_crl_days = 2
policy = any_name
unique_subject = no
email_in_dn = no
copy_extensions = copy
x509_extensions = client_cert

[ any_name ]
commonName = supplied

[ client_cert ]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = clientAuth
`;
}
