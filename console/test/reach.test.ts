// §20.2 Reach, through the console: a Connection whose token is never on
// the page, a ToolSource synced from a real MCP server with a tool enabled
// by review, a Runner paired from a code shown once and then revoked, and
// a memory store browsed by path with a diff of two versions and a
// proposal accepted.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { test } from "node:test";
import { promisify } from "node:util";
import { mcpServer } from "./mcp.js";
import { checkfuBinary, eventually } from "../../sdk/typescript/test/harness.js";
import { described, live, shot, signIn, violations } from "./browser.js";

const world = live({ CHECKFU_ALLOW_PRIVATE_TARGETS: "true" });
const TOKEN = "mcp-static-token-7f3a9c1e";

test("connections, tool review, runner pairing, memory versions and proposals", async () => {
  const admin = world.server.admin;
  const environmentId = (await admin.environments.list().first()).data[0]!.id;
  const mcp = await mcpServer(TOKEN);
  const connection = await admin.connections.create({
    environment_id: environmentId,
    name: "tracker",
    kind: "mcp",
    endpoint: { url: mcp.url },
    credential: { type: "static_bearer", token: TOKEN },
  });
  const source = await admin.toolSources.create({ environment_id: environmentId, name: "tracker-tools", connection_id: connection.id, default_config: { enabled: false } });
  await eventually(async () => ((await admin.toolSources.get(source.id)).tools.length > 0 ? true : (await admin.toolSources.sync(source.id), undefined)), "the tools are discovered");

  const page = await (await world.browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  const seen: string[] = [];
  page.on("response", async (r) => {
    if (r.url().includes("/v1/")) seen.push(await r.text().catch(() => ""));
  });
  await signIn(page, world.server.baseUrl, world.server.apiKey, "/console/reach");

  // The Connection: its credential's type and state, never the token.
  const row = page.locator('[data-connection="tracker"]');
  await row.waitFor();
  assert.match((await row.textContent()) ?? "", /static_bearer/);
  await shot(page, "reach-connections");

  // The tool source: a tool nobody reviewed is off (the posture), then enabled.
  await page.getByRole("link", { name: "Tool sources" }).click();
  const add = page.locator('[data-tool-source="tracker-tools"] [data-tool="add"]');
  await add.waitFor();
  assert.match((await add.textContent()) ?? "", /not reviewed: off by default\s*no/);
  await add.getByLabel("Review of add").selectOption("true");
  await page.locator('[data-tool="add"]', { hasText: "enabled (reviewed)" }).waitFor();
  const tool = (await admin.toolSources.get(source.id)).tools.find((t) => t.name === "add")!;
  assert.equal(tool.enabled, true);
  assert.equal(tool.offered, true);
  await shot(page, "reach-tools");

  // A Runner: the pairing code once, redeemed by the runner command, then revoked.
  const bot = await admin.principals.create({ name: "edge-bot", kind: "service" });
  await page.getByRole("link", { name: "Runners" }).click();
  const pair = page.getByRole("form", { name: "Pair a runner" });
  await pair.getByLabel("Pool").fill("edge");
  await pair.getByLabel("Runs as (service principal)").selectOption(bot.id);
  await pair.getByRole("button", { name: "Create pairing code" }).click();
  const code = await page.getByLabel("Pairing code").inputValue();
  assert.ok(code.length > 6);
  await shot(page, "reach-runner-pairing");
  await promisify(execFile)(checkfuBinary(), ["runner", "redeem", "--server", world.server.baseUrl, "--pairing-code", code, "--print-credential"]);
  await page.reload();
  const runners = page.getByRole("table", { name: "Runners" });
  await runners.waitFor();
  assert.equal(await page.getByLabel("Pairing code").count(), 0, "the code is not shown again");
  page.once("dialog", (d) => void d.accept());
  await runners.getByRole("button", { name: /^Revoke / }).click();
  await runners.locator(".status-revoked").waitFor();
  assert.equal((await admin.runners.list({ environment_id: environmentId }).all())[0]!.status, "revoked");

  // A memory store: a document's versions side by side, and a proposal accepted.
  const adminId = (await admin.principals.list().all()).find((p) => p.name === "admin")!.id;
  const store = await admin.memoryStores.create({ environment_id: environmentId, name: "notes", owner: { kind: "principal", id: adminId } });
  const first = await admin.memoryStores.writeDocument(store.id, { path: "/runbooks/deploy.md", content: "# Deploy\nstep one\nstep two\n", expected_sha256: null });
  await admin.memoryStores.writeDocument(store.id, {
    path: "/runbooks/deploy.md",
    content: "# Deploy\nstep one\nstep 2, carefully\n",
    expected_sha256: first.document.content_sha256,
  });
  await admin.memoryStores.writeDocument(store.id, { path: "/faq.md", content: "Ask first.\n", expected_sha256: null });
  await admin.memoryProposals.create({ memory_store_id: store.id, rationale: "a rollback section", changes: [{ path: "/runbooks/rollback.md", content: "# Rollback\n", expected_sha256: null }] } as never);
  await page.getByRole("link", { name: "Memory" }).click();
  await page.getByRole("link", { name: "notes" }).click();
  await page.getByRole("navigation", { name: "Documents" }).getByRole("link", { name: "deploy.md" }).click();
  const diff = page.getByRole("table", { name: "Version 1 and version 2 of /runbooks/deploy.md" });
  await diff.waitFor();
  await diff.locator("td.del", { hasText: "step two" }).waitFor();
  await diff.locator("td.add", { hasText: "step 2, carefully" }).waitFor();
  assert.ok(page.url().endsWith("?path=%2Frunbooks%2Fdeploy.md"), "the document is in the URL");
  await shot(page, "reach-memory");
  await page.locator("[data-proposal]").getByRole("button", { name: "Accept" }).click();
  await page.getByText("No open proposal.").waitFor();
  const doc = await admin.memoryStores.readDocument(store.id, { path: "/runbooks/rollback.md" });
  assert.equal(doc.document.content, "# Rollback\n");

  assert.deepEqual(described(await violations(page)), []);
  assert.ok(!seen.some((body) => body.includes(TOKEN)), "no answer the console read carries the token");
  assert.ok(!(await page.content()).includes(TOKEN));
});
