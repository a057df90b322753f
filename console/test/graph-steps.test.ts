// Issue 35's inspector in the graph builder: a Check's questions and rule,
// tried offline against the saved revision; a Connection step whose
// argument form comes from its tool's schema, one argument written and one
// bound to the event; retries; a Decision on a Check with every arm; a
// join's collected nodes, an Agent's for-each and an Outcome reviewing an
// Agent. The graph is saved,
// planned, applied and fired from the console, and the trace shows the
// Check and the Connection step completed against a real MCP server.

import assert from "node:assert/strict";
import { test } from "node:test";
import { deploy } from "../../sdk/typescript/test/fixtures.js";
import { eventually } from "../../sdk/typescript/test/harness.js";
import { described, live, shot, signIn, violations } from "./browser.js";
import { mcpServer } from "./mcp.js";

const world = live({ CHECKFU_ALLOW_PRIVATE_TARGETS: "true" });
const TOKEN = "mcp-static-token-graph-steps";

test("Checks, Connection steps, retries, joins, for-each and delivery screens in the inspector, run from the console", async () => {
  const admin = world.server.admin;
  const d = await deploy(admin);
  const env = d.environmentId;
  const bot = await admin.principals.create({ name: "billing-bot", kind: "service" });
  const server = await mcpServer(TOKEN);
  const connection = await admin.connections.create({
    environment_id: env,
    name: "ledger",
    kind: "mcp",
    endpoint: { url: server.url },
    credential: { type: "static_bearer", token: TOKEN },
  });
  const source = await admin.toolSources.create({ environment_id: env, name: "ledger-tools", connection_id: connection.id, default_config: { enabled: true } });
  await admin.permissionAssignments.create({ subject: { kind: "principal", id: bot.id }, permission: "use_connection", resource: { kind: "connection", id: connection.id } });
  await admin.actionPolicies.create({
    environment_id: env,
    name: "ledger-allowed",
    rules: [{ subject: { kind: "principal", id_glob: bot.id }, resource: { kind: "tool_source", id_glob: source.id }, disposition: "allow" }],
  });
  const now = Date.now();
  await admin.evaluatorQualifications.create({
    provider: "scripted",
    model: "scripted-1",
    purpose: "decision",
    evidence: "the console's graph suite",
    reviewed_at: new Date(now - 60_000).toISOString(),
    expires_at: new Date(now + 86_400_000).toISOString(),
  });
  const routeId = d.deployment.pins.model_routing_profile_id;

  const page = await (await world.browser.newContext({ viewport: { width: 1400, height: 1100 } })).newPage();
  await signIn(page, world.server.baseUrl, world.server.apiKey, `/console/automations/graphs/new?environment_id=${env}`);
  await page.getByRole("heading", { name: "New graph" }).waitFor();
  await page.getByLabel("Name", { exact: true }).fill("billing-flow");
  await page.getByLabel("Service principal").selectOption({ label: "billing-bot" });
  const toolbar = page.getByRole("toolbar", { name: "Graph" });

  // A trigger and a Check: one question, its rule, and the profile.
  await toolbar.getByRole("button", { name: "Add Trigger" }).click();
  await toolbar.getByRole("button", { name: "Add Check" }).click();
  const check = page.getByRole("region", { name: "Inspector: check1" });
  await check.getByLabel("Routing profile").fill(routeId);
  await check.getByLabel("Question 1 name").fill("billing");
  await check.getByLabel("Question 1 text").fill("require: invoice");
  await check.getByLabel("Rule").fill('"billing"');
  assert.equal(await check.getByRole("button", { name: "Test rule offline" }).isDisabled(), true, "an unsaved rule is not tried");

  // A Connection step: the tool's schema makes the form.
  await toolbar.getByRole("button", { name: "Add Connection" }).click();
  const call = page.getByRole("region", { name: "Inspector: connection1" });
  await call.getByLabel("Tool source").selectOption(source.id);
  await call.getByLabel("Tool to call").selectOption("add");
  await call.getByRole("group", { name: "a (required)" }).waitFor();
  await call.getByLabel("a (integer)").fill("2");
  await call.getByLabel("b: source").selectOption("bound");
  await call.getByLabel("b: from node").selectOption("trigger1");
  await call.getByLabel("b: at pointer").fill("/b");
  await call.getByLabel("Retry a failure that left no effect").check();
  await call.getByLabel("Attempts in all").fill("2");
  await shot(page, "graph-connection-step");
  assert.deepEqual(described(await violations(page)), [], "the Connection inspector");

  // Wired: trigger → check → connection.
  await page.locator('[data-node="trigger1"]').focus();
  await page.keyboard.press("Enter");
  const trigger = page.getByRole("region", { name: "Inspector: trigger1" });
  await trigger.getByLabel("Connect to").selectOption("check1");
  await trigger.getByRole("button", { name: "Add edge" }).click();
  await page.locator('[data-node="check1"]').focus();
  await page.keyboard.press("Enter");
  await check.getByLabel("Connect to").selectOption("connection1");
  await check.getByRole("button", { name: "Add edge" }).click();
  await page.getByRole("button", { name: /^edge then: check1 → connection1/ }).waitFor();

  // Saved, the rule is tried offline: no model, nothing recorded.
  await page.getByRole("button", { name: "Save", exact: true }).click();
  await page.getByText(/^Saved revision 1\./).waitFor();
  await check.getByLabel("Answer to billing").selectOption("no");
  await check.getByRole("button", { name: "Test rule offline" }).click();
  await check.getByRole("status").filter({ hasText: "Verdict no" }).waitFor();
  await shot(page, "graph-check-rule");

  // Apply, and fire from the Automation's page.
  await page.getByRole("button", { name: "Apply", exact: true }).click();
  await page.getByText(/^Applied revision \d+: create auto_/).waitFor();
  const graph = (await admin.automationGraphs.list({ environment_id: env }).all()).find((g) => g.name === "billing-flow")!;
  const saved = (await admin.automationGraphs.getRevision(graph.id, graph.latest_revision)).document as { nodes: Record<string, unknown>[] };
  const node = (id: string) => saved.nodes.find((n) => n["id"] === id)!;
  assert.deepEqual(node("connection1")["arguments"], { a: 2 });
  assert.deepEqual(node("connection1")["argumentBindings"], { b: { sourceNodeId: "trigger1", pointer: "/b" } });
  assert.deepEqual(node("connection1")["retry"], { maxAttempts: 2, backoffSeconds: 10 });
  assert.deepEqual(node("check1")["check"], { modelRoutingProfileId: routeId, questions: [{ name: "billing", question: "require: invoice" }], rule: "billing" });
  await page.getByRole("link", { name: "its Automation" }).click();
  await page.getByRole("heading", { name: "billing-flow" }).waitFor();
  await page.getByLabel("Event (JSON, optional)").fill('{"id": "1", "b": 3, "t": "invoice"}');
  await page.getByRole("button", { name: "Fire" }).click();
  const firingLink = page.getByRole("table", { name: "Firings" }).getByRole("link").first();
  await firingLink.waitFor();
  await firingLink.click();
  const tree = page.getByRole("list", { name: "Trace" });
  await eventually(
    async () => {
      await page.getByRole("button", { name: "Refresh" }).click();
      await tree.waitFor();
      const text = (await tree.locator('[data-step="connection1"]').textContent().catch(() => "")) ?? "";
      return text.includes("completed") ? true : undefined;
    },
    "the Connection step completes",
    60_000,
  );
  assert.match((await tree.locator('[data-step="check1"]').textContent()) ?? "", /step_check\s*completed/);
  // Each step shows what it left: the Check's evaluation, the call.
  assert.match((await tree.locator('[data-step="check1"]').textContent()) ?? "", /evaluation ceval_\w+ attempt 1 verdict yes/);
  assert.match((await tree.locator('[data-step="connection1"]').textContent()) ?? "", /call ccall_\w+ add attempt 1 succeeded/);
  assert.equal((await server.stats()).tool_calls, 1, "one call reached the server");
  await shot(page, "graph-connection-trace");

  // A Decision on a Check must have every arm; each missing one can finish.
  await page.goto(`${world.server.baseUrl}/console/automations/graphs/${graph.id}`);
  await page.getByRole("heading", { name: "billing-flow" }).waitFor();
  await toolbar.getByRole("button", { name: "Add Decision" }).click();
  const decision = page.getByRole("region", { name: "Inspector: decision1" });
  await decision.getByLabel("Decides on").selectOption("check");
  for (const arm of ["Otherwise", "Uncertain", "Error"]) await decision.getByRole("button", { name: `${arm}: finish` }).click();
  assert.equal(await decision.getByRole("button", { name: /: finish$/ }).count(), 0, "every arm is there");
  await decision.getByLabel("Retry a failure that left no effect").waitFor();

  // A join collecting two nodes, and an Agent once per item.
  await toolbar.getByRole("button", { name: "Add Join" }).click();
  const join = page.getByRole("region", { name: "Inspector: join1" });
  for (const [name, from] of [
    ["verdict", "check1"],
    ["sum", "connection1"],
  ] as const) {
    await join.getByLabel("New collected name").fill(name);
    await join.getByRole("button", { name: "Add collected node" }).click();
    await join.getByLabel(`${name}: collects`).selectOption(from);
  }
  await toolbar.getByRole("button", { name: "Add Agent" }).click();
  const agent = page.getByRole("region", { name: "Inspector: agent1" });
  await agent.getByLabel("Agent deployment").selectOption(d.deployment.id);
  await agent.getByLabel("Run once per item").check();
  await agent.getByLabel("items: from node").selectOption("trigger1");
  await agent.getByLabel("items: at pointer").fill("/files");
  await agent.getByLabel("Screen every message before it is delivered").check();
  await agent.getByLabel("Screen routing profile").fill(routeId);
  await agent.getByLabel("Screen instructions").fill("block: refund");
  await agent.getByLabel("If the screen fails").selectOption("fail_open");
  // An Outcome reviewing a second Agent: the edge kind follows the target.
  await toolbar.getByRole("button", { name: "Add Agent" }).click();
  await toolbar.getByRole("button", { name: "Add Outcome" }).click();
  const done = page.getByRole("region", { name: "Inspector: outcome1" });
  await done.getByLabel("Rubric").fill("require: done");
  await done.getByLabel("Most iterations").fill("2");
  await page.locator('[data-node="agent2"]').focus();
  await page.keyboard.press("Enter");
  const reviewed = page.getByRole("region", { name: "Inspector: agent2" });
  await reviewed.getByLabel("Connect to").selectOption("outcome1");
  assert.equal(await reviewed.getByLabel("As").inputValue(), "reviews", "an edge into an outcome reviews");
  await reviewed.getByRole("button", { name: "Add edge" }).click();
  await page.getByRole("button", { name: /^edge reviews: agent2 → outcome1/ }).waitFor();
  assert.deepEqual(described(await violations(page)), [], "the join, for-each and outcome inspectors");
  await page.getByRole("button", { name: "Save", exact: true }).click();
  await page.getByText(/^Saved revision 2\./).waitFor();
  const second = (await admin.automationGraphs.getRevision(graph.id, 2)).document as { nodes: Record<string, unknown>[] };
  const at = (id: string) => second.nodes.find((n) => n["id"] === id)!;
  assert.deepEqual(at("join1")["collect"], { verdict: "check1", sum: "connection1" });
  assert.deepEqual(at("agent1")["forEach"], { items: { sourceNodeId: "trigger1", pointer: "/files" }, maxItems: 10, concurrency: 2 });
  assert.deepEqual(at("agent1")["deliveryScreen"], { modelRoutingProfileId: routeId, instructions: "block: refund", onFailure: "fail_open" });
  assert.equal((at("decision1")["condition"] as { kind: string }).kind, "check");
  assert.deepEqual(at("outcome1"), { id: "outcome1", kind: "outcome", rubric: "require: done", maxIterations: 2 });
  const edges = (await admin.automationGraphs.getRevision(graph.id, 2)).document as { edges: { kind: string; from: string; to?: string | null }[] };
  assert.ok(edges.edges.some((e) => e.kind === "reviews" && e.from === "agent2" && e.to === "outcome1"));
});
