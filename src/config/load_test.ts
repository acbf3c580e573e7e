import assert from "node:assert/strict";
import { checkEnvNames, loadConfig } from "./load.ts";
import { ConfigError } from "./errors.ts";
import { envNameOf, KEY_SPECS } from "./schema.ts";

const load = (text: string, env: Record<string, string> = {}) =>
  loadConfig({ text, source: "t.toml", env });

function refuses(text: string, env: Record<string, string>, key: string | RegExp) {
  try {
    load(text, env);
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    if (typeof key === "string") assert.equal(err.key, key);
    else assert.match(err.message, key);
    return;
  }
  assert.fail("config was accepted");
}

Deno.test("loadConfig() gives every documented default for an empty file", () => {
  const c = load("");
  assert.equal(c.limits.max_packet_bytes, 1_048_576);
  assert.equal(c.limits.max_partial_packet_bytes_total, 67_108_864);
  assert.equal(c.limits.max_topic_bytes, 255);
  assert.equal(c.gateway.backend, "embedded");
  assert.equal(c.auth.allow_anonymous, false);
  assert.deepEqual(c.users, []);
});

Deno.test("loadConfig() lets an environment variable override a file key", () => {
  const c = load("[limits]\nmax_packet_bytes = 1000\n", {
    IGGY_MQTT_LIMITS_MAX_PACKET_BYTES: "2000",
  });
  assert.equal(c.limits.max_packet_bytes, 2000);
  const d = load("", { IGGY_MQTT_AUTH_ANONYMOUS_SOURCES: "10.0.0.1, 10.0.0.2" });
  assert.deepEqual(d.auth.anonymous_sources, ["10.0.0.1", "10.0.0.2"]);
});

Deno.test("loadConfig() refuses bad keys and values, naming the key", () => {
  refuses("[limits]\nmax_packet_bytes = 10\n", {}, "limits.max_packet_bytes");
  refuses("[limits]\nmax_packet_bytez = 10\n", {}, "limits.max_packet_bytez");
  refuses("[nope]\na = 1\n", {}, "nope");
  refuses("", { IGGY_MQTT_LIMITS_MAX_CONNECTIONS: "many" }, "limits.max_connections");
  refuses("", { IGGY_MQTT_LIMITS_NOPE: "1" }, "IGGY_MQTT_LIMITS_NOPE");
  refuses('[gateway]\nbackend = "kafka"\n', {}, "gateway.backend");
  refuses('[listeners]\ntcp = "nohost"\n', {}, "listeners.tcp");
  refuses('[listeners]\ntls = "0.0.0.0:8883"\n', {}, "listeners.tls_cert_file");
  refuses("this is not toml", {}, /not valid TOML/);
});

Deno.test("loadConfig() refuses a bound on partly received packets below one largest packet", () => {
  const limits = (packet: number, total: number) =>
    `[limits]\nmax_packet_bytes = ${packet}\nmax_partial_packet_bytes_total = ${total}\n`;
  refuses(limits(4_000_000, 2_000_000), {}, "limits.max_partial_packet_bytes_total");
  refuses(limits(1_048_576, 1_048_579), {}, "limits.max_partial_packet_bytes_total");
  const c = load(limits(1_048_576, 1_048_580));
  assert.equal(c.limits.max_partial_packet_bytes_total, 1_048_580);
});

Deno.test("loadConfig() takes listeners.proxy_protocol_from as IPs and CIDR blocks, naming a bad entry", () => {
  const c = load("", { IGGY_MQTT_LISTENERS_PROXY_PROTOCOL_FROM: "10.0.0.0/8, ::1" });
  assert.deepEqual(c.listeners.proxy_protocol_from, ["10.0.0.0/8", "::1"]);
  assert.deepEqual(load("").listeners.proxy_protocol_from, []);
  refuses(
    '[listeners]\nproxy_protocol_from = ["10.0.0.0/33"]\n',
    {},
    "listeners.proxy_protocol_from",
  );
  refuses('[listeners]\nproxy_protocol_from = ["lb.example"]\n', {}, /"lb\.example" is not an IP/);
});

Deno.test("loadConfig() accepts secrets only from the environment", () => {
  refuses('[iggy]\npassword = "hunter2"\n', {}, "iggy.password");
  const c = load('[gateway]\nbackend = "iggy"\n', { IGGY_MQTT_IGGY_PASSWORD: "hunter2" });
  assert.equal(c.iggy.password, "hunter2");
  refuses('[gateway]\nbackend = "iggy"\n', {}, "iggy.password");
  refuses('[gateway]\nbackend = "iggy"\n[limits]\nmax_topic_bytes = 300\n', {
    IGGY_MQTT_IGGY_PASSWORD: "x",
  }, "limits.max_topic_bytes");
});

Deno.test("loadConfig() parses users with Iggy-shaped permissions and refuses bad ones", () => {
  const hash = "pbkdf2-sha256$1000$c2FsdA==$aGFzaA==";
  const c = load(
    `[[users]]\nusername = "u"\npassword_hash = "${hash}"\n[users.permissions.global]\npoll_messages = true\n[users.permissions.streams.s.topics.t]\nsend_messages = true\n`,
  );
  assert.equal(c.users[0].username, "u");
  assert.equal(c.users[0].permissions.global.poll_messages, true);
  assert.equal(c.users[0].permissions.streams.get("s")!.topics.get("t")!.send_messages, true);
  refuses(`[[users]]\nusername = "u"\npassword_hash = "plain"\n`, {}, "users[0].password_hash");
  refuses(
    `[[users]]\nusername = "u"\npassword_hash = "${hash}"\n[users.permissions.global]\nfly = true\n`,
    {},
    "users[0].permissions.global.fly",
  );
});

Deno.test("[anonymous.permissions] gives anonymous clients per-topic rights; with auth.anonymous_permissions it is refused", () => {
  const c = load(
    `[anonymous.permissions.streams.paho.topics.nosubscribe]\nsend_messages = true\n`,
  );
  const t = c.anonymous_permissions!.streams.get("paho")!.topics.get("nosubscribe")!;
  assert.deepEqual([t.send_messages, t.poll_messages], [true, false]);
  assert.equal(load("").anonymous_permissions, null);
  refuses(`[anonymous]\nrights = 1\n`, {}, "anonymous.rights");
  refuses(
    `[anonymous.permissions.streams.s]\nfly = true\n`,
    {},
    "anonymous.permissions.streams.s.fly",
  );
  refuses(
    `[auth]\nanonymous_permissions = "send"\n[anonymous.permissions.global]\nsend_messages = true\n`,
    {},
    "auth.anonymous_permissions",
  );
});

Deno.test("config/gateway.toml documents every key with its default and environment variable, and loads", async () => {
  const text = await Deno.readTextFile(new URL("../../config/gateway.toml", import.meta.url));
  for (const s of KEY_SPECS) {
    assert.ok(text.includes(`env: ${envNameOf(s.key)}`), `${s.key}: env name missing`);
    const [table, key] = s.key.split(".");
    assert.ok(text.includes(`[${table}]`), `${table} missing`);
    assert.ok(new RegExp(`^#? ?${key} = `, "m").test(text), `${s.key} missing`);
  }
  const c = load(text);
  assert.equal(c.auth.allow_anonymous, true); // quick start
});

Deno.test("config/examples/paho.toml (the Paho suites' config) loads with its anonymous table", async () => {
  const text = await Deno.readTextFile(new URL("../../config/examples/paho.toml", import.meta.url));
  const c = load(text);
  assert.equal(c.limits.max_keep_alive_s, 60);
  assert.equal(c.mqtt5.subscribe_refusal, "unspecified");
  const paho = c.anonymous_permissions!.streams.get("paho")!;
  assert.equal(paho.topics.get("nosubscribe")!.poll_messages, false);
  assert.equal(paho.topics.get("messages")!.poll_messages, true);
});

Deno.test("iggy.address takes several comma-separated nodes and names the key for a bad one", () => {
  const c = load("", { IGGY_MQTT_IGGY_ADDRESS: "10.0.0.1:8090, 10.0.0.2:8090" });
  assert.equal(c.iggy.address, "10.0.0.1:8090, 10.0.0.2:8090");
  refuses("", { IGGY_MQTT_IGGY_ADDRESS: "10.0.0.1:8090,nonsense" }, "iggy.address");
  refuses("", { IGGY_MQTT_IGGY_PROTOCOL: "0.13" }, "iggy.protocol");
  assert.equal(load("", { IGGY_MQTT_IGGY_PROTOCOL: "0.12" }).iggy.protocol, "0.12");
});

Deno.test("listeners.tcp_socket_layer: auto by default, epoll or node by file or environment, anything else named", () => {
  assert.equal(load("").listeners.tcp_socket_layer, "auto");
  assert.equal(load('[listeners]\ntcp_socket_layer = "node"').listeners.tcp_socket_layer, "node");
  const env = { IGGY_MQTT_LISTENERS_TCP_SOCKET_LAYER: "epoll" };
  assert.equal(load("", env).listeners.tcp_socket_layer, "epoll");
  refuses("", { IGGY_MQTT_LISTENERS_TCP_SOCKET_LAYER: "io_uring" }, "listeners.tcp_socket_layer");
});

Deno.test("an unknown key or environment variable is refused with the closest key, if one is near", () => {
  refuses(
    "[limits]\nmax_packet_byte = 100",
    {},
    /"limits\.max_packet_byte": unknown key in t\.toml; did you mean limits\.max_packet_bytes\?$/,
  );
  refuses(
    "[limits]\nsomething_else = 1",
    {},
    /"limits\.something_else": unknown key in t\.toml$/,
  );
  refuses(
    "",
    { IGGY_MQTT_LISTENER_TCP: "x" },
    /did you mean IGGY_MQTT_LISTENERS_TCP \(listeners\.tcp\)\?$/,
  );
  refuses(
    "",
    { IGGY_MQTT_NOT_A_KEY_AT_ALL: "x" },
    /unknown environment variable for this gateway$/,
  );
});

Deno.test("a lower-case IGGY_MQTT_ variable and a misspelt table are refused with the name meant", () => {
  refuses(
    "",
    { iggy_mqtt_forward_enabled: "true" },
    /"iggy_mqtt_forward_enabled": .*upper case\); did you mean IGGY_MQTT_FORWARD_ENABLED \(forward\.enabled\)\?$/,
  );
  refuses(
    "",
    { Iggy_Mqtt_Forward_Enable: "true" },
    /did you mean IGGY_MQTT_FORWARD_ENABLED \(forward\.enabled\)\?$/,
  );
  refuses(
    "[limts]\nmax_packet_bytes = 100",
    {},
    /"limts": unknown table in t\.toml; did you mean \[limits\]\?$/,
  );
  refuses("[user]\nname = 1", {}, /did you mean \[users\]\?$/);
  refuses("[nothing_like_it]\nx = 1", {}, /"nothing_like_it": unknown table in t\.toml$/);
});

Deno.test("checkEnvNames() passes every documented name and other programs' variables", () => {
  checkEnvNames({ IGGY_MQTT_FORWARD_ENABLED: "true", PATH: "/bin", iggy_other: "x" });
  assert.throws(() => checkEnvNames({ IGGY_MQTT_FORWARD_ENABLE: "true" }), /FORWARD_ENABLED/);
});

Deno.test("loadConfig() refuses a table, a list or a date where a value belongs with a one-line ConfigError", () => {
  // Found by the loader fuzzer (tests/fuzz/loaders.ts): TOML tables have no prototype, and
  // showing one in the message threw a TypeError instead of the ConfigError.
  const cases: [string, RegExp][] = [
    [
      "[limits]\nmax_packet_bytes = { a = 1 }",
      /max_packet_bytes": must be an integer, got a table$/,
    ],
    ["[gateway]\nlog_level = {}", /log_level": must be one of .*, got a table$/],
    ["[limits]\nmax_packet_bytes = [1]", /got a list$/],
    ["[limits]\nmax_packet_bytes = 1979-05-27T07:32:00Z", /got a date$/],
    [
      '[gateway]\nid = "a',
      /is not valid TOML: Invalid TOML document: unfinished string \(line 2, column 6\)$/,
    ],
  ];
  for (const [text, message] of cases) {
    assert.throws(
      () => loadConfig({ text, source: "g.toml", env: {} }),
      (e) => e instanceof ConfigError && !e.message.includes("\n") && message.test(e.message),
      text,
    );
  }
});

Deno.test("limits.max_outbound_queue_bytes below limits.max_packet_bytes is refused, naming both", () => {
  refuses(
    "[limits]\nmax_packet_bytes = 2097152\nmax_outbound_queue_bytes = 1048576\nmax_outbound_queue_bytes_per_client = 1048576\nmax_partial_packet_bytes_total = 67108864",
    {},
    /"limits\.max_outbound_queue_bytes": must be at least limits\.max_packet_bytes$/,
  );
});

Deno.test("embedded.max_store_bytes too small for one message of limits.max_packet_bytes is refused, naming both; the least that fits is accepted", () => {
  refuses(
    "[embedded]\nmax_store_bytes = 1048576\n",
    {},
    /"embedded\.max_store_bytes": is 1048576, too small for one message of limits\.max_packet_bytes \(1048576\) even when empty: at least 1052672 \(well above, to hold a backlog\), or lower limits\.max_packet_bytes$/,
  );
  refuses(
    "[embedded]\nmax_store_bytes = 4194304\n",
    { IGGY_MQTT_LIMITS_MAX_PACKET_BYTES: "8388608" },
    "embedded.max_store_bytes",
  );
  assert.equal(load("[embedded]\nmax_store_bytes = 1052672\n").embedded.max_store_bytes, 1052672);
  const small = load(
    "[embedded]\nmax_store_bytes = 1048576\n[limits]\nmax_packet_bytes = 131072\n",
  );
  assert.equal(small.limits.max_packet_bytes, 131072);
});

Deno.test("http.admin_token comes from the environment only and is at least 16 characters", () => {
  refuses(
    '[http]\nadmin_token = "0123456789abcdef0123"\n',
    {},
    /is a secret; set it with IGGY_MQTT_HTTP_ADMIN_TOKEN/,
  );
  refuses(
    "",
    { IGGY_MQTT_HTTP_ADMIN_TOKEN: "short" },
    /"http\.admin_token": is 5 characters; use at least 16/,
  );
  assert.equal(
    load("", { IGGY_MQTT_HTTP_ADMIN_TOKEN: "0123456789abcdef" }).http.admin_token,
    "0123456789abcdef",
  );
  assert.equal(load("").http.admin_token, "", "none: admin writes refused");
});

Deno.test("loadConfig() reads comment-only lines as comments, keeping line numbers and multi-line strings", () => {
  const commented = '# one\n  # two\n[gateway]\n# three\nid = "gw-2" # after a value\n';
  assert.equal(load(commented).gateway.id, "gw-2");
  assert.throws(
    () => load('# one\n# two\n[gateway]\nid = "a'),
    (e) => e instanceof ConfigError && /unfinished string \(line 4, column 6\)$/.test(e.message),
  );
  // In a multi-line string a line starting with # is text, not a comment.
  const multi = '[mapping]\nmap_file = """\n# kept\nm.toml"""\n# a comment\n';
  assert.equal(load(multi).mapping.map_file, "# kept\nm.toml");
  const literal = "[mapping]\nmap_file = '''\n# kept too\nm.toml'''\n";
  assert.equal(load(literal).mapping.map_file, "# kept too\nm.toml");
});
