/**
 * The PROXY protocol (`listeners.proxy_protocol_from`) over real sockets, on both TCP socket
 * layers and on TLS (the header before the handshake): the address a trusted header names is
 * the one the anonymous rule, the per-source rate and the refusal log see; a header from any
 * other source, a malformed one and a slow one close that connection, counted and logged. Every
 * client here really comes from 127.0.0.1, so the header alone makes the difference (with a real
 * balancer in front: haproxy_test.ts).
 */
import assert from "node:assert/strict";
import net from "node:net";
import tls from "node:tls";
import {
  connectPacket,
  RawClient,
  startGateway,
  testEnv,
  type TestGateway,
  waitFor,
} from "../helpers/gateway.ts";
import { loadConfig } from "../../src/config/load.ts";

const FIX = new URL("../fixtures/tls/", import.meta.url).pathname;
const text = (s: string) => new TextEncoder().encode(s);
const v1 = (client: string) => text(`PROXY TCP4 ${client} 10.0.0.5 50000 1883\r\n`);

/** A v2 PROXY header for a TCP/IPv4 client. */
function v2(client: string): Uint8Array {
  const sig = [0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a];
  const ip = client.split(".").map(Number);
  return Uint8Array.from([...sig, 0x21, 0x11, 0, 12, ...ip, 10, 0, 0, 5, 0xc3, 0x50, 0x07, 0x5b]);
}

/** Sends `header` and a CONNECT in one write; the CONNACK's return code, or null: closed. */
async function connectVia(port: number, header: Uint8Array, id: string): Promise<number | null> {
  const c = await RawClient.connect(port);
  try {
    await c.send([...header, ...connectPacket(id)]);
    const p = await c.readPacket();
    return p === null ? null : p[3];
  } finally {
    c.close();
  }
}

function refusals(gw: TestGateway): { remote: string; listener: string; reason: string }[] {
  return gw.logs.map((l) => JSON.parse(l)).filter((l) => l.msg === "Connection refused");
}

const refused = (gw: TestGateway, reason: string, listener = "tcp") =>
  gw.view.metrics.connectionsRefused.get({ reason, listener });

for (const layer of ["epoll", "node"] as const) {
  Deno.test(`PROXY v1 and v2 on the ${layer} layer: the client's own address meets the anonymous rule and the per-source rate`, async () => {
    const gw = await startGateway({
      env: {
        IGGY_MQTT_LISTENERS_TCP_SOCKET_LAYER: layer,
        IGGY_MQTT_LISTENERS_PROXY_PROTOCOL_FROM: "127.0.0.1",
        IGGY_MQTT_AUTH_ANONYMOUS_SOURCES: "198.51.100.8,198.51.100.9",
        IGGY_MQTT_LIMITS_MAX_CONNECTION_RATE_PER_SOURCE: "1", // a burst of 2
      },
    });
    try {
      assert.equal(await connectVia(gw.port, v1("198.51.100.8"), "v1-device"), 0);
      assert.equal(await connectVia(gw.port, v2("198.51.100.8"), "v2-device"), 0);
      // The balancer's own address (127.0.0.1, a default anonymous source) lends nobody its rights.
      assert.equal(await connectVia(gw.port, v1("198.51.100.7"), "stranger"), 0x05);
      // 198.51.100.8's burst is spent; another client behind the same balancer is not refused.
      assert.equal(await connectVia(gw.port, v2("198.51.100.8"), "third"), null);
      assert.equal(await connectVia(gw.port, v1("198.51.100.9"), "neighbour"), 0);
      assert.equal(gw.view.metrics.connectionsRefused.get({ reason: "rate_per_source" }), 1);
      const remotes = refusals(gw).map((r) => r.remote);
      assert.deepEqual(remotes, ["198.51.100.7", "198.51.100.8"]);
    } finally {
      await gw.stop();
    }
  });
}

Deno.test("PROXY protocol: untrusted, malformed and slow headers close their connection, counted and logged", async () => {
  const gw = await startGateway({
    env: {
      IGGY_MQTT_LISTENERS_PROXY_PROTOCOL_FROM: "10.0.0.0/8", // not this test's 127.0.0.1
      IGGY_MQTT_LIMITS_CONNECT_TIMEOUT_MS: "300",
    },
  });
  const trusting = await startGateway({
    env: {
      IGGY_MQTT_LISTENERS_PROXY_PROTOCOL_FROM: "127.0.0.0/8",
      IGGY_MQTT_LIMITS_CONNECT_TIMEOUT_MS: "300",
    },
  });
  try {
    assert.equal(await connectVia(gw.port, v1("198.51.100.7"), "spoofer"), null);
    assert.equal(await connectVia(gw.port, v2("198.51.100.7"), "spoofer"), null);
    assert.equal(refused(gw, "proxy_untrusted"), 2);
    // Plain MQTT from the same untrusted source is served as before.
    assert.equal(await connectVia(gw.port, new Uint8Array(0), "plain"), 0);
    assert.deepEqual(refusals(gw).map((r) => [r.remote, r.reason]), [
      ["127.0.0.1", "PROXY header from a source not in listeners.proxy_protocol_from"],
      ["127.0.0.1", "PROXY header from a source not in listeners.proxy_protocol_from"],
    ]);

    // From a trusted source: a header that breaks the protocol, none at all, one too slow.
    assert.equal(await connectVia(trusting.port, text("PROXY TCP4 1.2.3.4\r\n"), "bad"), null);
    assert.equal(await connectVia(trusting.port, new Uint8Array(0), "none"), null);
    assert.equal(refused(trusting, "proxy_header"), 2);
    const slow = await RawClient.connect(trusting.port);
    await slow.send(v1("198.51.100.7").subarray(0, 10));
    assert.ok(await slow.closedByPeer(3000), "closed at the connect timeout");
    slow.close();
    await waitFor(() => refused(trusting, "proxy_timeout") === 1, 3000, "the timeout counted");
    const reasons = refusals(trusting).map((r) => r.reason);
    assert.match(reasons[0], /PROXY v1: "PROXY TCP4 1\.2\.3\.4" is not 6 fields/);
    assert.match(reasons[1], /no PROXY protocol header/);
    assert.equal(reasons[2], "no whole PROXY header within 300 ms");
  } finally {
    await gw.stop();
    await trusting.stop();
  }
});

/** A TLS connection that sends `header` in the clear first; the CONNACK's code, or null. */
async function tlsConnectVia(port: number, header: Uint8Array, id: string): Promise<number | null> {
  const raw = net.connect(port, "127.0.0.1");
  await new Promise<void>((resolve, reject) => raw.once("connect", resolve).once("error", reject));
  raw.write(header);
  const socket = tls.connect({
    socket: raw,
    ca: Deno.readTextFileSync(`${FIX}server.crt`),
    servername: "localhost",
  });
  try {
    const got = Promise.withResolvers<number | null>();
    socket.once("data", (d: Uint8Array) => got.resolve(d[3]));
    socket.once("close", () => got.resolve(null));
    socket.once("error", () => got.resolve(null));
    socket.write(connectPacket(id));
    return await got.promise;
  } finally {
    socket.destroy();
  }
}

Deno.test("PROXY protocol on TLS: the header before the handshake names the client; an untrusted one is refused", async () => {
  const env = (from: string) => ({
    IGGY_MQTT_LISTENERS_TCP: "",
    IGGY_MQTT_LISTENERS_TLS: "127.0.0.1:0",
    IGGY_MQTT_LISTENERS_TLS_CERT_FILE: `${FIX}server.crt`,
    IGGY_MQTT_LISTENERS_TLS_KEY_FILE: `${FIX}server.key`,
    IGGY_MQTT_LISTENERS_PROXY_PROTOCOL_FROM: from,
    IGGY_MQTT_AUTH_ANONYMOUS_SOURCES: "198.51.100.8",
  });
  const gw = await startGateway({ env: env("127.0.0.1") });
  const other = await startGateway({ env: env("10.0.0.0/8") });
  try {
    assert.equal(await tlsConnectVia(gw.port, v2("198.51.100.8"), "tls-device"), 0);
    assert.equal(await tlsConnectVia(gw.port, v1("198.51.100.8"), "tls-device-v1"), 0);
    assert.equal(await tlsConnectVia(gw.port, v1("198.51.100.7"), "tls-stranger"), 0x05);
    assert.deepEqual(refusals(gw).map((r) => [r.remote, r.listener]), [["198.51.100.7", "tls"]]);
    assert.equal(await tlsConnectVia(other.port, v2("198.51.100.8"), "tls-spoofer"), null);
    await waitFor(() => refused(other, "proxy_untrusted", "tls") === 1, 3000, "counted");
    // Plain TLS from that untrusted source still works (its own address is no anonymous source).
    assert.equal(await tlsConnectVia(other.port, new Uint8Array(0), "tls-plain"), 0x05);
  } finally {
    await gw.stop();
    await other.stop();
  }
});

/** A WebSocket with `X-Forwarded-For: xff`: the CONNACK's code, or null when refused or closed. */
async function wsConnectVia(port: number, xff: string, id: string): Promise<number | null> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/mqtt`, {
    protocols: ["mqtt"],
    headers: { "x-forwarded-for": xff },
  } as unknown as string[]);
  ws.binaryType = "arraybuffer";
  const got = Promise.withResolvers<number | null>();
  ws.onopen = () => ws.send(connectPacket(id));
  ws.onmessage = (e) => got.resolve(new Uint8Array(e.data as ArrayBuffer)[3]);
  ws.onerror = () => got.resolve(null);
  ws.onclose = () => got.resolve(null);
  try {
    return await got.promise;
  } finally {
    const closed = new Promise((r) => ws.readyState === WebSocket.CLOSED ? r(0) : ws.onclose = r);
    ws.close();
    await closed;
  }
}

Deno.test("X-Forwarded-For on the WebSocket listener: taken from a trusted proxy, ignored from others, refused when malformed", async () => {
  const env = (from: string) => ({
    IGGY_MQTT_LISTENERS_WS: "127.0.0.1:0",
    IGGY_MQTT_LISTENERS_PROXY_PROTOCOL_FROM: from,
    IGGY_MQTT_AUTH_ANONYMOUS_SOURCES: "198.51.100.8",
  });
  const gw = await startGateway({ env: env("127.0.0.1, 10.0.0.0/8") });
  const other = await startGateway({ env: env("10.0.0.0/8") });
  try {
    const port = gw.wsPort!;
    assert.equal(await wsConnectVia(port, "198.51.100.8", "ws-device"), 0);
    // Read from the right, past the trusted proxies (10.0.0.3 is one): a forged left end is not.
    assert.equal(await wsConnectVia(port, "198.51.100.7, 198.51.100.8, 10.0.0.3", "ws-chain"), 0);
    assert.equal(await wsConnectVia(port, "198.51.100.8, 198.51.100.7", "ws-stranger"), 0x05);
    assert.equal(await wsConnectVia(port, "unknown", "ws-bad"), null);
    assert.deepEqual(refusals(gw).map((r) => [r.remote, r.listener, r.reason]), [
      ["198.51.100.7", "ws", "anonymous access is not allowed from 198.51.100.7"],
      ["127.0.0.1", "ws", 'X-Forwarded-For: "unknown" is not an IP'],
    ]);
    // From a peer not trusted the header is not taken: its own address is no anonymous source.
    assert.equal(await wsConnectVia(other.wsPort!, "198.51.100.8", "ws-spoofer"), 0x05);
  } finally {
    await gw.stop();
    await other.stop();
  }
});

Deno.test("A reload that changes listeners.proxy_protocol_from is refused, naming the key: the listeners trust as they were started to", async () => {
  const env = { IGGY_MQTT_LISTENERS_PROXY_PROTOCOL_FROM: "10.0.0.2" };
  const gw = await startGateway({ env });
  const reloadWith = (from: string) =>
    gw.gateway.reload(loadConfig({
      text: "",
      source: "reload",
      env: { ...testEnv(gw.dir), IGGY_MQTT_LISTENERS_PROXY_PROTOCOL_FROM: from },
    }));
  try {
    await assert.rejects(
      reloadWith("10.0.0.2,10.0.0.3"),
      /listeners\.proxy_protocol_from.*changed from \["10\.0\.0\.2"\] to \["10\.0\.0\.2","10\.0\.0\.3"\]: restart/,
    );
    await reloadWith("10.0.0.2"); // the same list still reloads
  } finally {
    await gw.stop();
  }
});

Deno.test("PROXY protocol: 300 mutated headers over real sockets leave the gateway serving (epoll layer)", async () => {
  const gw = await startGateway({
    env: {
      IGGY_MQTT_LISTENERS_TCP_SOCKET_LAYER: "epoll",
      IGGY_MQTT_LISTENERS_PROXY_PROTOCOL_FROM: "127.0.0.1",
      IGGY_MQTT_AUTH_ANONYMOUS_SOURCES: "*",
      IGGY_MQTT_LIMITS_CONNECT_TIMEOUT_MS: "500",
    },
  });
  let seed = 54;
  const random = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x80000000;
  };
  const int = (n: number) => Math.floor(random() * n);
  const seeds = [v1("198.51.100.7"), v2("198.51.100.7"), text("PROXY UNKNOWN\r\n")];
  try {
    for (let round = 0; round < 30; round++) {
      await Promise.all(Array.from({ length: 10 }, async (_, i) => {
        const bytes = [...seeds[int(seeds.length)]];
        for (let m = 1 + int(3); m > 0; m--) {
          const at = int(bytes.length);
          if (random() < 0.5) bytes[at] = int(256);
          else bytes.splice(at, int(3));
        }
        const c = await RawClient.connect(gw.port);
        try {
          await c.send([...bytes, ...connectPacket(`fuzz-${round}-${i}`)]);
          await c.readPacket(2000); // a CONNACK, or the close
        } finally {
          c.close();
        }
      }));
    }
    assert.equal(await connectVia(gw.port, v2("198.51.100.9"), "witness"), 0);
    const malformed = gw.view.metrics.connectionsRefused.get({
      reason: "proxy_header",
      listener: "tcp",
    });
    assert.ok(malformed > 0, "malformed headers were counted");
  } finally {
    await gw.stop();
  }
});
