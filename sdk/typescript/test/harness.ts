// Starts a live `checkfu up` for a test file: its own data directory, a
// free port, the bootstrap admin key read from the file it writes.

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Checkfu, type ClientOptions } from "../src/index.js";

/** The package root (tests run from build-test/test/). */
export const PACKAGE_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** The `checkfu` binary: `CHECKFU_BIN`, else the workspace's debug build. */
export function checkfuBinary(): string {
  const candidates = [
    process.env["CHECKFU_BIN"],
    process.env["CARGO_TARGET_DIR"] && path.join(process.env["CARGO_TARGET_DIR"], "debug/checkfu"),
    path.join(PACKAGE_ROOT, "../../target/debug/checkfu"),
    // Where .ci/run keeps its target directory.
    process.env["HOME"] && path.join(process.env["HOME"], ".cache/checkfu/target/debug/checkfu"),
  ].filter((c): c is string => !!c);
  const found = candidates.find((c) => existsSync(c));
  if (!found) {
    throw new Error(`no checkfu binary at ${candidates.join(" or ")}: build it (cargo build --workspace --bins) or set CHECKFU_BIN`);
  }
  return found;
}

export interface Server {
  baseUrl: string;
  apiKey: string;
  /** A client with the admin key. */
  admin: Checkfu;
  client(options?: Partial<ClientOptions>): Checkfu;
  stop(): Promise<void>;
}

/** Starts `checkfu up` with `env` added to its environment. */
export async function startCheckfu(env: Record<string, string> = {}): Promise<Server> {
  const dataDir = await mkdtemp(path.join(tmpdir(), "checkfu-sdk-"));
  const child: ChildProcess = spawn(checkfuBinary(), ["up", "--data-dir", dataDir, "--listen", "127.0.0.1:0"], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    const timer = setTimeout(() => reject(new Error(`checkfu up did not start in 60 s: ${stderr}`)), 60_000);
    lines.on("line", (line) => {
      const m = /API base URL (\S+)/.exec(line);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    void exited.then((code) => reject(new Error(`checkfu up exited (${code}): ${stderr}`)));
  });
  const baseUrl = url.replace(/\/v1$/, "");
  for (let i = 0; ; i++) {
    const ready = await fetch(`${baseUrl}/readyz`).then((r) => r.ok, () => false);
    if (ready) break;
    if (i > 200) throw new Error("checkfu never became ready");
    await new Promise((r) => setTimeout(r, 100));
  }
  const apiKey = (await readFile(path.join(dataDir, "admin.key"), "utf8")).trim();
  const client = (options: Partial<ClientOptions> = {}) => new Checkfu({ baseUrl, apiKey, ...options });
  return {
    baseUrl,
    apiKey,
    admin: client(),
    client,
    async stop() {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** Waits until `check` answers a value (not undefined), polling. */
export async function eventually<T>(check: () => Promise<T | undefined>, what: string, timeoutMs = 20_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
