// The MCP server the console's tests call through Connections: the
// repository's fixture on the official MCP Python SDK, on a free local
// port, accepting `Bearer <token>`. The run fails without it.

import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import path from "node:path";
import { after } from "node:test";
import { fileURLToPath } from "node:url";
import { eventually } from "../../sdk/typescript/test/harness.js";

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

const started: ChildProcess[] = [];
after(() => started.forEach((c) => c.kill()));

/** Starts the fixture; stopped when the test file ends. `stats` counts what it served. */
export async function mcpServer(token: string): Promise<{ url: string; stats: () => Promise<{ tool_calls: number }> }> {
  const port = await freePort();
  // From build-test/console/test/ back to the repository.
  const script = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../../e2e/fixtures/mcp_server.py");
  started.push(spawn("python3", [script, "--port", String(port), "--token", token], { stdio: "ignore" }));
  const stats = async () => (await (await fetch(`http://127.0.0.1:${port}/control/stats`)).json()) as { tool_calls: number };
  await eventually(async () => ((await stats().then(() => true, () => false)) ? true : undefined), "the MCP server listens", 30_000);
  return { url: `http://127.0.0.1:${port}/mcp`, stats };
}
