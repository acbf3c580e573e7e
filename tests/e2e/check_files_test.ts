/**
 * `check` reads and parses every file `run` will read, under the permission set `run` has
 * (`deno run -P=gateway main.ts check`, as an operator runs it): the TLS listener's certificate
 * chain and key (a pair), the client CA and the CRL, Iggy's CA file. Each problem exits 1 with
 * one line naming the key and the file. Certificates are made by `openssl` for each run
 * (tests/helpers/client_pki.ts) under `config/`, where the permission set may read.
 */
import assert from "node:assert/strict";
import { cli, ownStderrLines, ROOT, STACK_FRAME } from "../helpers/cli.ts";
import { hasOpenssl, makeClientPki } from "../helpers/client_pki.ts";
import { removeStore } from "../helpers/store.ts";

const HAS_OPENSSL = await hasOpenssl();
if (!HAS_OPENSSL) console.warn("WARNING: openssl not found; the check file tests are SKIPPED");
const IS_ROOT = Deno.uid() === 0;
if (IS_ROOT) console.warn("WARNING: running as root; the unreadable-file step is SKIPPED");

/** The environment of a TLS listener on `pair` (not bound: `check` binds nothing). */
function tlsEnv(pair: { crt: string; key: string }): Record<string, string> {
  return {
    IGGY_MQTT_LISTENERS_TLS: "127.0.0.1:0",
    IGGY_MQTT_LISTENERS_TLS_CERT_FILE: pair.crt,
    IGGY_MQTT_LISTENERS_TLS_KEY_FILE: pair.key,
  };
}

type CheckResult = Awaited<ReturnType<typeof cli>>;

/** Exit 1, no stack, nothing on stdout, and exactly `line` on stderr. */
function assertRefused(r: CheckResult, line: string | RegExp): void {
  assert.equal(r.code, 1, `exit code; stdout:\n${r.stdout}`);
  assert.doesNotMatch(r.stderr, STACK_FRAME);
  assert.equal(r.stdout, "", "nothing printed before the failure");
  const lines = ownStderrLines(r.stderr);
  assert.equal(lines.length, 1, `want one line, got:\n${lines.join("\n")}`);
  if (typeof line === "string") assert.equal(lines[0], line);
  else assert.match(lines[0], line);
}

const READ_WALL =
  'the gateway may read only ./config, ./data, /etc/iggy-mqtt-gateway, /var/lib/iggy-mqtt-gateway (permission set "gateway" in deno.json); put the file there';

Deno.test({
  name: "check reads and parses the TLS files run will read, and refuses each broken one",
  ignore: !HAS_OPENSSL,
  async fn(t) {
    const pki = await makeClientPki();
    const outside = await Deno.makeTempDir({ prefix: "iggy-mqtt-check-outside-" });
    try {
      const server = await pki.deviceCa.issue({ cn: "gateway.example" });
      const other = await pki.deviceCa.issue({ cn: "other.example" });
      const device = await pki.deviceCa.issue({ cn: "sensor-7" });
      const crl = await pki.deviceCa.revoke(device);
      const write = async (name: string, text: string) => {
        await Deno.writeTextFile(`${pki.dir}/${name}`, text);
        return `${pki.dir}/${name}`;
      };

      await t.step("a good pair, client CA and CRL: exit 0, one line per file", async () => {
        const r = await cli(["check"], {
          env: {
            ...tlsEnv(server),
            IGGY_MQTT_LISTENERS_TLS_CLIENT_AUTH: "require",
            IGGY_MQTT_LISTENERS_TLS_CLIENT_CA_FILE: pki.deviceCa.crt,
            IGGY_MQTT_LISTENERS_TLS_CRL_FILE: crl,
          },
        });
        assert.equal(r.code, 0, r.stderr);
        assert.match(
          r.stdout,
          new RegExp(
            `^listeners.tls_cert_file "${server.crt}": 1 certificate\\(s\\), CN=gateway.example, valid until \\S+; listeners.tls_key_file "${server.key}" is its key$`,
            "m",
          ),
        );
        assert.match(
          r.stdout,
          new RegExp(
            `^listeners.tls_client_ca_file "${pki.deviceCa.crt}": 1 certificate\\(s\\): CN=Test Device CA$`,
            "m",
          ),
        );
        assert.match(
          r.stdout,
          new RegExp(`^listeners.tls_crl_file "${crl}": 1 revoked serial\\(s\\)$`, "m"),
        );
      });

      await t.step("a missing certificate file", async () => {
        const missing = `${pki.dir}/no-such.crt`;
        assertRefused(
          await cli(["check"], { env: tlsEnv({ crt: missing, key: server.key }) }),
          `Cannot read listeners.tls_cert_file "${missing}": not found`,
        );
      });

      await t.step("a certificate outside the permission set", async () => {
        const crt = `${outside}/server.crt`;
        await Deno.copyFile(server.crt, crt);
        assertRefused(
          await cli(["check"], { env: tlsEnv({ crt, key: server.key }) }),
          `Cannot read listeners.tls_cert_file "${crt}": ${READ_WALL}`,
        );
      });

      await t.step({
        name: "a certificate file the OS does not let the gateway read",
        // root reads a file of mode 000 all the same.
        ignore: IS_ROOT,
        async fn() {
          const crt = await write("unreadable.crt", await Deno.readTextFile(server.crt));
          await Deno.chmod(crt, 0o000);
          assertRefused(
            await cli(["check"], { env: tlsEnv({ crt, key: server.key }) }),
            `Cannot read listeners.tls_cert_file "${crt}": permission denied`,
          );
        },
      });

      await t.step(
        "an expired certificate: a warning, not a failure (run starts with it)",
        async () => {
          const old = await pki.deviceCa.issue({
            cn: "old.example",
            startDate: "20200101000000Z",
            endDate: "20200201000000Z",
          });
          const r = await cli(["check"], { env: tlsEnv(old) });
          assert.equal(r.code, 0, r.stderr);
          assert.match(
            r.stdout,
            new RegExp(
              `^WARNING listeners.tls_cert_file "${old.crt}": certificate CN=old.example expired on 2020-02-01T00:00:00.000Z; clients will refuse it$`,
              "m",
            ),
          );
        },
      );

      await t.step("a key that is not the certificate's", async () => {
        assertRefused(
          await cli(["check"], { env: tlsEnv({ crt: server.crt, key: other.key }) }),
          `listeners.tls_key_file "${other.key}" is not the key of the certificate (CN=gateway.example) in listeners.tls_cert_file "${server.crt}"`,
        );
      });

      await t.step("a malformed PEM certificate", async () => {
        const pem = await Deno.readTextFile(server.crt);
        // The base64 body cut in half: still framed as a certificate, no longer DER.
        const body = pem.split("\n").filter((l) => !l.startsWith("-----"));
        const crt = await write(
          "cut.crt",
          `-----BEGIN CERTIFICATE-----\n${
            body.slice(0, body.length >> 1).join("\n")
          }\n-----END CERTIFICATE-----\n`,
        );
        assertRefused(
          await cli(["check"], { env: tlsEnv({ crt, key: server.key }) }),
          new RegExp(
            `^listeners.tls_cert_file "${crt}" holds no usable PEM certificate: its certificate does not parse \\(.+\\)$`,
          ),
        );
      });

      await t.step("a key file named as the certificate: no PEM certificate in it", async () => {
        assertRefused(
          await cli(["check"], { env: tlsEnv({ crt: server.key, key: server.key }) }),
          `listeners.tls_cert_file "${server.key}" holds no PEM certificate`,
        );
      });

      await t.step("a malformed PEM key", async () => {
        const key = await write(
          "broken.key",
          "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n",
        );
        assertRefused(
          await cli(["check"], { env: tlsEnv({ crt: server.crt, key }) }),
          new RegExp(`^listeners.tls_key_file "${key}" is not a usable PEM private key \\(.+\\)$`),
        );
      });

      await t.step("a missing client CA file, a CRL that is no CRL", async () => {
        const clientAuth = { ...tlsEnv(server), IGGY_MQTT_LISTENERS_TLS_CLIENT_AUTH: "optional" };
        const missing = `${pki.dir}/no-such-ca.crt`;
        assertRefused(
          await cli(["check"], {
            env: { ...clientAuth, IGGY_MQTT_LISTENERS_TLS_CLIENT_CA_FILE: missing },
          }),
          `Cannot read listeners.tls_client_ca_file "${missing}": not found`,
        );
        const notCrl = await write("not.crl", "this is not a revocation list\n");
        assertRefused(
          await cli(["check"], {
            env: {
              ...clientAuth,
              IGGY_MQTT_LISTENERS_TLS_CLIENT_CA_FILE: pki.deviceCa.crt,
              IGGY_MQTT_LISTENERS_TLS_CRL_FILE: notCrl,
            },
          }),
          new RegExp(`^listeners.tls_crl_file "${notCrl}" is not a usable CRL \\(.+\\)$`),
        );
      });

      await t.step("the wss listener alone needs the pair too", async () => {
        const missing = `${pki.dir}/no-such.key`;
        assertRefused(
          await cli(["check"], {
            env: {
              IGGY_MQTT_LISTENERS_WSS: "127.0.0.1:0",
              IGGY_MQTT_LISTENERS_TLS_CERT_FILE: server.crt,
              IGGY_MQTT_LISTENERS_TLS_KEY_FILE: missing,
            },
          }),
          `Cannot read listeners.tls_key_file "${missing}": not found`,
        );
      });

      await t.step("iggy.tls_ca_file in forward mode, checked with --offline too", async () => {
        const dir = await Deno.makeTempDir();
        const forward = {
          IGGY_MQTT_FORWARD_ENABLED: "true",
          IGGY_MQTT_IGGY_TLS: "true",
          IGGY_MQTT_IGGY_PASSWORD: "iggy",
          IGGY_MQTT_EMBEDDED_PATH: `${dir}/gateway.db`,
        };
        try {
          const good = await cli(["check", "--offline"], {
            env: { ...forward, IGGY_MQTT_IGGY_TLS_CA_FILE: pki.deviceCa.crt },
          });
          assert.equal(good.code, 0, good.stderr);
          assert.match(
            good.stdout,
            /^iggy.tls_ca_file ".+": 1 certificate\(s\): CN=Test Device CA$/m,
          );
          const notCa = await write("not-ca.crt", "just text\n");
          assertRefused(
            await cli(["check", "--offline"], {
              env: { ...forward, IGGY_MQTT_IGGY_TLS_CA_FILE: notCa },
            }),
            `iggy.tls_ca_file "${notCa}" holds no PEM certificate`,
          );
        } finally {
          await Deno.remove(dir, { recursive: true });
        }
      });

      await t.step("run refuses the mismatched pair check refuses", async () => {
        await Deno.mkdir(`${ROOT}data`, { recursive: true });
        const db = `data/check-files-${crypto.randomUUID()}.db`;
        try {
          const r = await cli(["run"], {
            env: {
              ...tlsEnv({ crt: server.crt, key: other.key }),
              IGGY_MQTT_LISTENERS_TCP: "",
              IGGY_MQTT_LISTENERS_HTTP: "",
              IGGY_MQTT_LISTENERS_WS: "",
              IGGY_MQTT_EMBEDDED_PATH: db,
            },
          });
          assert.equal(r.code, 1, r.stdout);
          assert.match(ownStderrLines(r.stderr).at(-1) ?? "", /unusable certificate or key/);
        } finally {
          await removeStore(`${ROOT}${db}`);
        }
      });
    } finally {
      await pki.remove();
      await Deno.remove(outside, { recursive: true });
    }
  },
});
