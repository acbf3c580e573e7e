/**
 * The aarch64 Deno run as an ordinary process under qemu-user (`qemu-aarch64 -L SYSROOT deno
 * …`), the way the aarch64 smoke drives it: one-shot commands (`--version`, `read`) and the
 * gateway itself as a long-running child whose JSON log lines can be waited for.
 *
 * `deno task` cannot run under emulation (it starts a child `deno` the kernel cannot execute
 * without binfmt), so callers pass the task's own arguments (`run -P=gateway main.ts …`).
 *
 * @module
 */

/** Where the emulated Deno and its emulator are. */
export interface Emulator {
  /** qemu-user's aarch64 binary, e.g. "qemu-aarch64". */
  readonly qemu: string;
  /** The aarch64 root with the dynamic loader and libc (`-L`), e.g. "/usr/aarch64-linux-gnu". */
  readonly sysroot: string;
  /** The aarch64 `deno` executable (from npm's `@deno/linux-arm64-glibc`). */
  readonly deno: string;
  /** DENO_DIR for the emulated Deno; undefined: Deno's default. */
  readonly denoDir?: string;
  /** The repository root (working directory: `-P=gateway` paths are relative to it). */
  readonly root: string;
  /** Every emulated child still running, so that a failed run can end them all. */
  readonly children: Set<Deno.ChildProcess>;
}

/** The output of a finished one-shot command. */
export interface Finished {
  readonly code: number;
  readonly signal: Deno.Signal | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * The environment of every emulated child: the caller's, minus anything that would reconfigure
 * the gateway behind the smoke's back (IGGY_MQTT_*, OTEL_*), plus NO_COLOR for plain logs.
 */
function childEnv(emu: Emulator): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(Deno.env.toObject())) {
    if (!k.startsWith("IGGY_MQTT_") && !k.startsWith("OTEL_")) env[k] = v;
  }
  env.NO_COLOR = "1";
  if (emu.denoDir !== undefined) env.DENO_DIR = emu.denoDir;
  return env;
}

/** Spawns `qemu-aarch64 -L SYSROOT deno ARGS`, tracked in `emu.children` until it exits. */
function spawnEmulated(emu: Emulator, args: string[]): Deno.ChildProcess {
  const child = new Deno.Command(emu.qemu, {
    args: ["-L", emu.sysroot, emu.deno, ...args],
    cwd: emu.root,
    clearEnv: true,
    env: childEnv(emu),
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  emu.children.add(child);
  child.status.finally(() => emu.children.delete(child));
  return child;
}

/** SIGKILLs every emulated child still running (the end of a failed run). */
export async function killEmulated(emu: Emulator): Promise<void> {
  const left = [...emu.children];
  for (const child of left) {
    try {
      child.kill("SIGKILL");
    } catch { /* exited meanwhile */ }
  }
  await Promise.all(left.map((c) => c.status));
}

/** Runs `deno ARGS` under emulation to the end; SIGKILLed (and rejected) after timeoutMs. */
export async function runEmulated(
  emu: Emulator,
  args: string[],
  timeoutMs: number,
): Promise<Finished> {
  const child = spawnEmulated(emu, args);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      child.kill("SIGKILL");
    } catch { /* exited */ }
  }, timeoutMs);
  try {
    const out = await child.output();
    const dec = new TextDecoder();
    const result = {
      code: out.code,
      signal: out.signal,
      stdout: dec.decode(out.stdout),
      stderr: dec.decode(out.stderr),
    };
    if (timedOut) {
      throw new Error(
        `"deno ${args.join(" ")}" did not finish within ${timeoutMs} ms; stderr: ${
          tail(result.stderr)
        }`,
      );
    }
    return result;
  } finally {
    clearTimeout(timer);
  }
}

/** One JSON log line of the gateway. */
export type LogLine = Record<string, unknown> & { readonly msg?: string };

/** The emulated gateway process (`deno run -P=gateway main.ts run --config FILE`). */
export class EmulatedGateway {
  readonly child: Deno.ChildProcess;
  /** Every JSON log line written to stdout so far, in order. */
  readonly lines: LogLine[] = [];
  #stderr = "";
  #partial = "";
  #status: Deno.CommandStatus | null = null;
  readonly status: Promise<Deno.CommandStatus>;

  constructor(emu: Emulator, configFile: string) {
    this.child = spawnEmulated(emu, [
      "run",
      "-P=gateway",
      "main.ts",
      "run",
      "--config",
      configFile,
    ]);
    this.status = this.child.status.then((s) => this.#status = s);
    this.#collect();
  }

  #collect(): void {
    (async () => {
      for await (const chunk of this.child.stdout.pipeThrough(new TextDecoderStream())) {
        const parts = (this.#partial + chunk).split("\n");
        this.#partial = parts.pop()!;
        for (const part of parts) {
          try {
            this.lines.push(JSON.parse(part));
          } catch {
            this.lines.push({ msg: undefined, text: part });
          }
        }
      }
    })().catch(() => {});
    (async () => {
      for await (const chunk of this.child.stderr.pipeThrough(new TextDecoderStream())) {
        this.#stderr = (this.#stderr + chunk).slice(-4096);
      }
    })().catch(() => {});
  }

  /** The exit status once it has exited, else null. */
  get exited(): Deno.CommandStatus | null {
    return this.#status;
  }

  /** The last few KB of stderr, for failure messages. */
  get stderrTail(): string {
    return tail(this.#stderr);
  }

  /**
   * Waits for the first log line with `msg` at index `from` or later; rejects when the process
   * exits first or after timeoutMs.
   */
  async waitForLog(msg: string, timeoutMs: number, from = 0): Promise<LogLine> {
    let found: LogLine | undefined;
    await until(
      () => {
        found = this.lines.slice(from).find((l) => l.msg === msg);
        if (found === undefined && this.#status !== null) {
          throw new Error(
            `the gateway exited (code ${this.#status.code}, signal ${this.#status.signal}) ` +
              `before logging "${msg}"; stderr: ${this.stderrTail}`,
          );
        }
        return found !== undefined;
      },
      timeoutMs,
      `the gateway to log "${msg}"`,
    );
    return found!;
  }

  /** Sends a signal; false if the process had already exited. */
  signal(signal: Deno.Signal): boolean {
    try {
      this.child.kill(signal);
      return true;
    } catch {
      return false;
    }
  }
}

/** Polls `cond` every 50 ms until it is true; rejects after timeoutMs naming `what`. */
export async function until(
  cond: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) {
      throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

function tail(text: string): string {
  const t = text.trim();
  return t.length > 1500 ? `…${t.slice(-1500)}` : t || "(empty)";
}
