/**
 * A headless Chromium driven over the DevTools protocol (the status page's and the WebSocket
 * listener's browser tests): launched on a URL, it evaluates expressions in the page.
 *
 * @module
 */
import assert from "node:assert/strict";
import { hasCommand, waitFor } from "./gateway.ts";

function findBrowser(): string | null {
  const fromEnv = Deno.env.get("CHROMIUM");
  if (fromEnv) return fromEnv;
  for (const name of ["chromium", "google-chrome", "google-chrome-stable"]) {
    if (hasCommand(name)) return name;
  }
  return null;
}

/** The browser to drive, or null when none is installed. */
export const BROWSER = findBrowser();

/** A headless browser driven over the DevTools protocol, so the page runs in real time. */
export class Browser {
  #child: Deno.ChildProcess;
  #profile: string;
  #ws: WebSocket | null = null;
  #nextId = 1;
  #pending = new Map<number, (msg: { result?: unknown; error?: unknown }) => void>();

  private constructor(child: Deno.ChildProcess, profile: string) {
    this.#child = child;
    this.#profile = profile;
  }

  /** Launches the browser on url (flags as in the brief) and attaches to the page. */
  static async open(url: string): Promise<Browser> {
    const profile = await Deno.makeTempDir({ prefix: "iggy-mqtt-chromium-" });
    const child = new Deno.Command(BROWSER!, {
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        `--user-data-dir=${profile}`,
        "--window-size=1200,900",
        "--remote-debugging-address=127.0.0.1",
        "--remote-debugging-port=0",
        url,
      ],
      env: { HOME: profile },
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).spawn();
    const b = new Browser(child, profile);
    try {
      const port = await devtoolsPort(child.stderr);
      let target: { type: string; webSocketDebuggerUrl: string } | undefined;
      await waitFor(
        async () => {
          const list = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
          target = list.find((t: { type: string }) => t.type === "page");
          return target !== undefined;
        },
        15_000,
        "a page target in the browser",
      );
      assert.ok(target, "no page target in the browser");
      const ws = new WebSocket(target.webSocketDebuggerUrl);
      await new Promise((resolve, reject) => {
        ws.onopen = resolve;
        ws.onerror = reject;
      });
      ws.onmessage = (e) => b.settle(JSON.parse(e.data));
      b.#ws = ws;
      return b;
    } catch (err) {
      await b.close();
      throw err;
    }
  }

  /** Hands a DevTools reply to the call waiting for it (events have no id). */
  settle(msg: { id?: number; result?: unknown; error?: unknown }): void {
    if (msg.id === undefined) return;
    this.#pending.get(msg.id)?.(msg);
    this.#pending.delete(msg.id);
  }

  /** Sends one DevTools command and returns its result. */
  async call(method: string, params: Record<string, unknown> = {}): Promise<unknown> {
    const id = this.#nextId++;
    const reply = new Promise<{ result?: unknown; error?: unknown }>((r) =>
      this.#pending.set(id, r)
    );
    this.#ws!.send(JSON.stringify({ id, method, params }));
    const msg = await reply;
    if (msg.error) throw new Error(`${method}: ${JSON.stringify(msg.error)}`);
    return msg.result;
  }

  /** Evaluates an expression in the page and returns its value. */
  async evaluate<T>(expression: string): Promise<T> {
    const r = await this.call("Runtime.evaluate", { expression, returnByValue: true }) as {
      result: { value: T };
    };
    return r.result.value;
  }

  /** A PNG of the viewport. */
  async screenshot(): Promise<Uint8Array> {
    const r = await this.call("Page.captureScreenshot", { format: "png" }) as { data: string };
    return Uint8Array.from(atob(r.data), (ch) => ch.charCodeAt(0));
  }

  /** A PNG of the whole page, beyond the viewport (the status page is taller than it). */
  async screenshotFullPage(): Promise<Uint8Array> {
    const m = await this.call("Page.getLayoutMetrics") as {
      cssContentSize: { width: number; height: number };
    };
    const { width, height } = m.cssContentSize;
    const r = await this.call("Page.captureScreenshot", {
      format: "png",
      captureBeyondViewport: true,
      clip: { x: 0, y: 0, width: Math.ceil(width), height: Math.ceil(height), scale: 1 },
    }) as { data: string };
    return Uint8Array.from(atob(r.data), (ch) => ch.charCodeAt(0));
  }

  async close(): Promise<void> {
    try {
      this.#ws?.close();
    } catch { /* closed */ }
    try {
      this.#child.kill("SIGTERM");
    } catch { /* gone */ }
    await this.#child.status;
    await Deno.remove(this.#profile, { recursive: true }).catch(() => {});
  }
}

/** Reads the browser's stderr until it prints its DevTools port; keeps draining after. */
async function devtoolsPort(stderr: ReadableStream<Uint8Array>): Promise<number> {
  const reader = stderr.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const { value, done } = await reader.read();
    if (done) break;
    text += value;
    const m = /DevTools listening on ws:\/\/[^:]+:(\d+)\//.exec(text);
    if (m) {
      // Keep reading so the browser never blocks on a full stderr pipe.
      (async () => {
        while (!(await reader.read()).done) { /* drain */ }
      })().catch(() => {});
      return Number(m[1]);
    }
  }
  throw new Error(`browser did not start DevTools:\n${text.slice(-2000)}`);
}
