/**
 * The systemd unit `config/iggy-mqtt-gateway.service`: static checks of its hardening and
 * paths (always), `systemd-analyze verify` and an offline exposure score (when systemd-analyze
 * is installed; the tests say SKIPPED in their names otherwise).
 *
 * `verify` insists that ExecStart's binary exists, and /usr/local/bin/iggy-mqtt-gateway is
 * not installed on a CI machine, so the verified copy has ExecStart pointed at a stub script;
 * every other line is verified as shipped.
 *
 * @module
 */
import assert from "node:assert/strict";
import { hasCommand, run } from "../helpers/gateway.ts";

const UNIT_PATH = new URL("../../config/iggy-mqtt-gateway.service", import.meta.url);
const UNIT = await Deno.readTextFile(UNIT_PATH);
const BINARY = "/usr/local/bin/iggy-mqtt-gateway";

const HAS_SYSTEMD_ANALYZE = hasCommand("systemd-analyze");
if (!HAS_SYSTEMD_ANALYZE) {
  console.warn(
    "WARNING: systemd-analyze not found; `systemd-analyze verify` of the unit is SKIPPED " +
      "(install Debian package systemd).",
  );
}
const SKIP_NOTE = HAS_SYSTEMD_ANALYZE ? "" : " [SKIPPED: systemd-analyze not installed]";

/** `[Section]` → directive → every value, in file order (comments and blanks dropped). */
function parseUnit(text: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>();
  let current: Map<string, string[]> | null = null;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#") || line.startsWith(";")) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      current = new Map();
      sections.set(header[1], current);
      continue;
    }
    assert.ok(current, `directive outside a section: ${line}`);
    const eq = line.indexOf("=");
    assert.ok(eq > 0, `not a directive: ${line}`);
    const key = line.slice(0, eq);
    const values = current.get(key) ?? [];
    values.push(line.slice(eq + 1));
    current.set(key, values);
  }
  return sections;
}

const units = parseUnit(UNIT);
const service = units.get("Service") ?? new Map<string, string[]>();
/** The last value of a [Service] directive (systemd's "last one wins" for scalars). */
function directive(key: string): string | undefined {
  return service.get(key)?.at(-1);
}

Deno.test("systemd unit has [Unit], [Service] and [Install] sections", () => {
  assert.deepEqual([...units.keys()], ["Unit", "Service", "Install"]);
  assert.equal(units.get("Install")?.get("WantedBy")?.[0], "multi-user.target");
  // After the network and, where a wait unit is enabled, a synchronized clock (OPERATIONS).
  assert.equal(units.get("Unit")?.get("After")?.[0], "network-online.target time-sync.target");
});

Deno.test("systemd unit runs the release binary with the config in /etc/iggy-mqtt-gateway", () => {
  // Every IGGY_MQTT_ name checked for slips of one character before run, in the same environment.
  assert.equal(directive("ExecStartPre"), `${BINARY} check --env-only`);
  assert.equal(
    directive("ExecStart"),
    `${BINARY} run --config /etc/iggy-mqtt-gateway/gateway.toml`,
  );
  const env = service.get("Environment") ?? [];
  assert.ok(env.includes("IGGY_MQTT_EMBEDDED_PATH=/var/lib/iggy-mqtt-gateway/gateway.db"));
  assert.ok(env.includes("IGGY_MQTT_MAPPING_MAP_FILE=/etc/iggy-mqtt-gateway/topic-map.toml"));
  assert.equal(directive("StateDirectory"), "iggy-mqtt-gateway");
  assert.equal(directive("EnvironmentFile"), "-/etc/iggy-mqtt-gateway/gateway.env");
});

Deno.test("systemd unit paths are inside the gateway permission set of deno.json", async () => {
  const denoJson = JSON.parse(
    await Deno.readTextFile(new URL("../../deno.json", import.meta.url)),
  );
  const perms = denoJson.permissions.gateway;
  // The compiled binary embeds -P=gateway: every path the unit hands it must be allowed.
  assert.ok(perms.read.includes("/etc/iggy-mqtt-gateway"));
  assert.ok(perms.read.includes("/var/lib/iggy-mqtt-gateway"));
  assert.ok(perms.write.includes("/var/lib/iggy-mqtt-gateway"));
  assert.ok(perms.env.includes("IGGY_MQTT_*"));
  assert.ok(perms.env.includes("iggy_mqtt_*"), "lower-case slips are seen and refused");
});

Deno.test("systemd unit is hardened: own user, read-only system, no capabilities", () => {
  const expected: Record<string, string> = {
    User: "iggy-mqtt-gateway",
    Group: "iggy-mqtt-gateway",
    NoNewPrivileges: "yes",
    CapabilityBoundingSet: "",
    AmbientCapabilities: "",
    ProtectSystem: "strict",
    ProtectHome: "yes",
    PrivateTmp: "yes",
    PrivateDevices: "yes",
    ProtectKernelTunables: "yes",
    ProtectKernelModules: "yes",
    ProtectControlGroups: "yes",
    RestrictNamespaces: "yes",
    RestrictSUIDSGID: "yes",
    LockPersonality: "yes",
    RestrictAddressFamilies: "AF_INET AF_INET6 AF_UNIX",
    SystemCallArchitectures: "native",
    UMask: "0077",
  };
  for (const [key, value] of Object.entries(expected)) {
    assert.equal(directive(key), value, `[Service] ${key}`);
  }
  // Not root, and no ReadWritePaths punching holes into ProtectSystem=strict.
  assert.equal(service.get("ReadWritePaths"), undefined);
  assert.ok(!service.has("DynamicUser") || directive("DynamicUser") === "yes");
});

Deno.test("systemd unit restarts on failure, reloads with SIGHUP and waits for /ready", () => {
  assert.equal(directive("Restart"), "on-failure");
  assert.equal(directive("ExecReload"), "/bin/kill -HUP $MAINPID");
  assert.equal(directive("Type"), "exec");
  const post = directive("ExecStartPost") ?? "";
  assert.match(post, /^\/usr\/bin\/curl .*--fail .*--retry-connrefused .*\/ready$/);
  assert.match(post, /http:\/\/127\.0\.0\.1:8080\/ready/, "default listeners.http");
  // Stop must outlast the drain (gateway.drain_timeout_ms, default 10 s).
  assert.ok(Number(directive("TimeoutStopSec")) > 10);
});

Deno.test(
  `systemd-analyze verify accepts the unit${SKIP_NOTE}`,
  { ignore: !HAS_SYSTEMD_ANALYZE },
  async () => {
    const dir = await Deno.makeTempDir({ prefix: "iggy-mqtt-unit-" });
    try {
      const stub = `${dir}/iggy-mqtt-gateway`;
      await Deno.writeTextFile(stub, "#!/bin/sh\nexit 0\n", { mode: 0o755 });
      const unit = `${dir}/iggy-mqtt-gateway.service`;
      await Deno.writeTextFile(unit, UNIT.replaceAll(BINARY, stub));
      const r = await run("systemd-analyze", ["verify", unit], { cwd: dir });
      assert.equal(r.code, 0, `systemd-analyze verify failed:\n${r.stdout}${r.stderr}`);
      assert.equal(r.stderr.trim(), "", `systemd-analyze verify warned:\n${r.stderr}`);

      // Offline exposure score (0 = locked down, 10 = unprotected); 2.0 is "OK" territory.
      const s = await run("systemd-analyze", [
        "security",
        "--offline=yes",
        "--threshold=20",
        unit,
      ], { cwd: dir });
      assert.equal(s.code, 0, `exposure above 2.0:\n${s.stdout.split("\n").slice(-3).join("\n")}`);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
);
