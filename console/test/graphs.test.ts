// §20.4 acceptance 5–7 in the graph builder: build trigger → Agent →
// Decision → Agent on the canvas with the mouse and with the keyboard; a
// bad edge is marked by Plan; Save, Plan, Apply, Fire, and the trace tree
// shows each step. Export JSON is the revision's document and layout, and
// importing it re-creates the graph. Test this block renders the prompt
// and Run once, confirmed, starts exactly one Session — and none when the
// Deployment was repinned since the preview.

import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { test } from "node:test";
import type { Locator, Page } from "playwright-core";
import { deploy } from "../../sdk/typescript/test/fixtures.js";
import { eventually } from "../../sdk/typescript/test/harness.js";
import { described, live, shot, signIn, violations } from "./browser.js";

const world = live();

async function centre(l: Locator): Promise<{ x: number; y: number }> {
  const b = await l.boundingBox();
  assert.ok(b, "the element is on screen");
  return { x: b.x + b.width / 2, y: b.y + b.height / 2 };
}

/** Drags from `from`'s port onto `to`, as a person connects two blocks. */
async function connectByMouse(page: Page, from: string, to: string): Promise<void> {
  const a = await centre(page.locator(`[data-node="${from}"] circle.port`));
  const b = await centre(page.locator(`[data-node="${to}"] rect`));
  await page.mouse.move(a.x, a.y);
  await page.mouse.down();
  await page.mouse.move((a.x + b.x) / 2, (a.y + b.y) / 2, { steps: 4 });
  await page.mouse.move(b.x, b.y, { steps: 4 });
  await page.mouse.up();
}

async function dragNode(page: Page, id: string, dx: number, dy: number): Promise<void> {
  const a = await centre(page.locator(`[data-node="${id}"] rect`));
  await page.mouse.move(a.x, a.y);
  await page.mouse.down();
  await page.mouse.move(a.x + dx / 2, a.y + dy / 2, { steps: 3 });
  await page.mouse.move(a.x + dx, a.y + dy, { steps: 3 });
  await page.mouse.up();
}

const transform = (page: Page, id: string) => page.locator(`[data-node="${id}"]`).getAttribute("transform");

test("build, plan, apply, fire and trace a graph; export, import; test a block and run it once", async () => {
  const admin = world.server.admin;
  const d = await deploy(admin);
  const bot = await admin.principals.create({ name: "triage-bot", kind: "service" });
  await admin.permissionAssignments.create({ subject: { kind: "principal", id: bot.id }, permission: "invoke", resource: { kind: "agent", id: d.agent.id } });
  const page = await (await world.browser.newContext({ viewport: { width: 1400, height: 1000 }, acceptDownloads: true })).newPage();
  await signIn(page, world.server.baseUrl, world.server.apiKey, `/console/automations/graphs/new?environment_id=${d.environmentId}`);
  await page.getByRole("heading", { name: "New graph" }).waitFor();
  await page.getByLabel("Name", { exact: true }).fill("triage-flow");
  await page.getByLabel("Service principal").selectOption({ label: "triage-bot" });

  // With the mouse: a trigger, an Agent, a Decision, joined by dragging.
  const toolbar = page.getByRole("toolbar", { name: "Graph" });
  await toolbar.getByRole("button", { name: "Add Trigger" }).click();
  await toolbar.getByRole("button", { name: "Add Agent" }).click();
  const inspector = page.getByRole("region", { name: "Inspector: agent1" });
  await inspector.getByLabel("Agent deployment").selectOption(d.deployment.id);
  await inspector.getByLabel("Prompt").fill("Triage {{event.title}}");
  await inspector.getByLabel("Include incoming event").check();
  await toolbar.getByRole("button", { name: "Add Decision" }).click();
  await connectByMouse(page, "trigger1", "agent1");
  await connectByMouse(page, "agent1", "decision1");
  await page.getByRole("button", { name: /^edge starts: trigger1 → agent1/ }).waitFor();
  await page.getByRole("button", { name: /^edge then: agent1 → decision1/ }).waitFor();
  const before = await transform(page, "decision1");
  await dragNode(page, "decision1", 0, 120);
  assert.notEqual(await transform(page, "decision1"), before, "the block moved with the mouse");

  // The Decision's inspector: a binding and a typed predicate value.
  await page.locator('[data-node="decision1"] rect').click();
  const decision = page.getByRole("region", { name: "Inspector: decision1" });
  await decision.getByLabel("New binding name").fill("flag");
  await decision.getByRole("button", { name: "Add binding" }).click();
  await decision.getByLabel("flag: from node").selectOption("trigger1");
  await decision.getByLabel("flag: at pointer").fill("/flag");
  await decision.getByLabel("Pointer", { exact: true }).fill("/flag");
  await decision.getByLabel("Value", { exact: true }).fill("true");
  await decision.getByLabel("Value type").selectOption("boolean");
  await decision.getByRole("button", { name: "Otherwise: finish" }).click();
  assert.deepEqual(described(await violations(page)), [], "the Decision inspector");

  // With the keyboard: a second Agent added, moved, configured and connected.
  await toolbar.getByRole("button", { name: "Add Agent" }).focus();
  await page.keyboard.press("Enter");
  const second = page.getByRole("region", { name: "Inspector: agent2" });
  await second.getByLabel("Agent deployment").focus();
  await page.keyboard.type(d.deployment.key);
  await second.getByLabel("Prompt").focus();
  await page.keyboard.type("Fix it");
  const node2 = page.locator('[data-node="agent2"]');
  await node2.focus();
  const at = await transform(page, "agent2");
  await page.keyboard.press("ArrowDown");
  await page.keyboard.press("Shift+ArrowDown");
  await page.keyboard.press("Shift+ArrowDown");
  assert.notEqual(await transform(page, "agent2"), at, "the block moved with the arrow keys");
  await page.locator('[data-node="decision1"]').focus();
  await page.keyboard.press("Enter");
  const connectTo = decision.getByLabel("Connect to");
  await connectTo.focus();
  await page.keyboard.type("agent2");
  await page.keyboard.press("Tab");
  assert.equal(await decision.getByLabel("As").inputValue(), "continue", "a Decision's first arm continues");
  await page.keyboard.press("Tab");
  await page.keyboard.press("Enter");
  await page.getByRole("button", { name: /^edge continue: decision1 → agent2/ }).waitFor();
  // A block added and deleted by keyboard leaves nothing behind.
  await toolbar.getByRole("button", { name: "Add Wait" }).focus();
  await page.keyboard.press("Enter");
  await page.locator('[data-node="wait1"]').focus();
  await page.keyboard.press("Delete");
  assert.equal(await page.locator('[data-node="wait1"]').count(), 0);

  // A bad edge (into a trigger): Plan marks that edge and no other.
  await connectByMouse(page, "agent2", "trigger1");
  await page.getByRole("button", { name: "Plan", exact: true }).click();
  const bad = page.locator("g.edge.bad");
  await bad.first().waitFor();
  assert.equal(await bad.count(), 1);
  assert.match((await bad.getAttribute("aria-label")) ?? "", /^edge then: agent2 → trigger1 \(plan: edge_endpoint_kind/);
  assert.equal(await page.locator("g.node.bad").count(), 0, "the error is on the edge, not a node");
  await shot(page, "graph-plan-error");
  await bad.focus();
  await page.keyboard.press("Delete");
  assert.equal(await page.locator("g.edge.bad").count(), 0);

  // Save, Plan, Apply.
  await page.getByRole("button", { name: "Apply", exact: true }).click();
  await page.getByText(/^Applied revision \d+: create auto_/).waitFor();
  await shot(page, "graph-builder");
  const graph = (await admin.automationGraphs.list({ environment_id: d.environmentId }).all()).find((g) => g.name === "triage-flow")!;
  assert.ok(graph.automation_id, "applied");
  const revision = await admin.automationGraphs.getRevision(graph.id, graph.latest_revision);
  const doc = revision.document as { nodes: { id: string; kind: string; condition?: unknown; includeEvent?: boolean }[]; edges: unknown[] };
  assert.deepEqual(doc.nodes.map((n) => n.id).sort(), ["agent1", "agent2", "decision1", "trigger1"]);
  assert.deepEqual(
    doc.nodes.find((n) => n.id === "decision1")!.condition,
    { kind: "predicates", predicates: [{ kind: "equals", pointer: "/flag", value: true }] },
    "Value type boolean saves true, not \"true\"",
  );
  assert.equal(doc.nodes.find((n) => n.id === "agent1")!.includeEvent, true);

  // Fire it from its Automation's page and read the trace.
  await page.getByRole("link", { name: "its Automation" }).click();
  await page.getByRole("heading", { name: "triage-flow" }).waitFor();
  await page.getByLabel("Event (JSON, optional)").fill('{"id": "1", "flag": true, "title": "Login fails"}');
  await page.getByRole("button", { name: "Fire" }).click();
  const firingLink = page.getByRole("table", { name: "Firings" }).getByRole("link").first();
  await firingLink.waitFor();
  await shot(page, "automation");
  const firingId = (await firingLink.getAttribute("href"))!.split("/").pop();
  await firingLink.click();
  const tree = page.getByRole("list", { name: "Trace" });
  await tree.waitFor();
  await eventually(
    async () => {
      await page.getByRole("button", { name: "Refresh" }).click();
      await tree.waitFor();
      const text = (await tree.locator('[data-step="agent2"]').textContent().catch(() => "")) ?? "";
      return text.includes("completed") ? true : undefined;
    },
    "the firing's last step completes",
    60_000,
  );
  assert.match((await tree.locator('[data-step="agent1"]').textContent()) ?? "", /step_agent\s*completed.*session/);
  assert.match((await tree.locator('[data-step="decision1"]').textContent()) ?? "", /decision\s*completed\s*\(continue\)/);
  await shot(page, "automation-trace");
  await page.goto(`${world.server.baseUrl}/console/automations`);
  await page.getByRole("table", { name: "Automations" }).getByText("triage-flow").waitFor();
  // The row's last firing is the one just traced, with no request per row.
  const lastFiring = page.getByRole("table", { name: "Automations" }).getByRole("link", { name: "succeeded" });
  await lastFiring.waitFor();
  assert.equal(await lastFiring.getAttribute("href"), `/console/automations/firings/${firingId}`);
  await shot(page, "automations");

  // Export JSON is exactly the revision's document and layout.
  await page.goto(`${world.server.baseUrl}/console/automations/graphs/${graph.id}`);
  const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Export JSON" }).click()]);
  const exported = JSON.parse(await readFile((await download.path())!, "utf8")) as { document: unknown; layout: unknown };
  const latest = await admin.automationGraphs.getRevision(graph.id, graph.latest_revision);
  assert.deepEqual(exported, { document: latest.document, layout: latest.layout });

  // Importing that file re-creates the graph once the original is gone.
  await admin.automationGraphs.delete(graph.id);
  await page.goto(`${world.server.baseUrl}/console/automations/graphs/new?environment_id=${d.environmentId}`);
  await page.getByLabel("Import JSON").setInputFiles((await download.path())!);
  await page.getByText("Imported: Save to keep it.").waitFor();
  await page.getByRole("button", { name: "Save", exact: true }).click();
  await page.getByText(/^Saved revision 1\./).waitFor();
  const again = (await admin.automationGraphs.list({ environment_id: d.environmentId }).all()).find((g) => g.name === "triage-flow")!;
  assert.notEqual(again.id, graph.id);
  const first = await admin.automationGraphs.getRevision(again.id, 1);
  assert.deepEqual({ document: first.document, layout: first.layout }, exported, "the import re-created the same document and layout");

  // Test this block, then Run once behind a confirmation.
  const sessionsBefore = (await admin.sessions.list({ environment_id: d.environmentId }).all()).length;
  await page.locator('[data-node="agent1"] rect').click();
  const agent1 = page.getByRole("region", { name: "Inspector: agent1" });
  await agent1.getByText("Test this block").click();
  await agent1.getByLabel(/^Sample event/).fill('{"title": "Login fails"}');
  await agent1.getByLabel("Prompt").focus();
  await page.getByRole("button", { name: "Save", exact: true }).click();
  await page.getByText("Saved the layout; the document is unchanged (revision 1).").waitFor();
  const layoutOnly = await admin.automationGraphs.get(again.id);
  assert.equal(layoutOnly.latest_revision, 1, "the same document makes no revision");
  assert.deepEqual((layoutOnly.layout as { sample_event?: unknown }).sample_event, { title: "Login fails" }, "the sample is kept in the layout");
  await agent1.getByRole("button", { name: "Render the prompt" }).click();
  const rendered = agent1.locator("[data-rendered-prompt]");
  await rendered.waitFor();
  assert.equal((await rendered.textContent())?.trim(), "Triage Login fails");
  assert.equal((await admin.sessions.list({ environment_id: d.environmentId }).all()).length, sessionsBefore, "a preview creates nothing");
  // A repin after the preview: Run once refuses to run a version nobody saw.
  const pins = d.deployment.pins;
  const v2 = await admin.agents.publishVersion(d.agent.id);
  await admin.agentDeployments.createRevision(d.deployment.id, {
    agent_version: v2.version,
    model_routing_profile_id: pins.model_routing_profile_id,
    sandbox_profile_id: pins.sandbox_profile_id,
  });
  await agent1.getByRole("button", { name: "Run once…" }).click();
  await agent1.getByRole("button", { name: "Confirm: run once" }).click();
  await agent1.getByRole("alert").filter({ hasText: `now pins agent version ${v2.version}, not ${pins.agent_version}` }).waitFor();
  assert.equal((await admin.sessions.list({ environment_id: d.environmentId }).all()).length, sessionsBefore, "a stale preview runs nothing");
  await agent1.getByRole("button", { name: "Render the prompt" }).click();
  await agent1.getByText(`for agent version ${v2.version} of`).waitFor();
  await agent1.getByRole("button", { name: "Run once…" }).click();
  await agent1.getByRole("alertdialog", { name: "Run once?" }).waitFor();
  await shot(page, "graph-test-block");
  await agent1.getByRole("button", { name: "Confirm: run once" }).click();
  const link = agent1.getByRole("status").getByRole("link");
  await link.waitFor();
  const sessionsAfter = await admin.sessions.list({ environment_id: d.environmentId }).all();
  assert.equal(sessionsAfter.length, sessionsBefore + 1, "exactly one Session");
  const madeId = await link.textContent();
  const made = sessionsAfter.find((s) => s.id === madeId)!;
  assert.equal(made.agent_deployment_id, d.deployment.id);
  assert.deepEqual((made.metadata as { graph_node_test?: unknown }).graph_node_test, { graph_id: again.id, revision: 1, node: "agent1" });
  await link.click();
  await page.locator('[data-type="user.message"]', { hasText: "Triage Login fails" }).waitFor();
});

test("a one-time trigger is entered with its UTC offset and shown in UTC", async () => {
  const page = await (await world.browser.newContext()).newPage();
  const environmentId = (await world.server.admin.environments.list().first()).data[0]!.id;
  await signIn(page, world.server.baseUrl, world.server.apiKey, `/console/automations/graphs/new?environment_id=${environmentId}`);
  await page.getByRole("toolbar", { name: "Graph" }).getByRole("button", { name: "Add Trigger" }).click();
  const inspector = page.getByRole("region", { name: "Inspector: trigger1" });
  await inspector.getByLabel("Trigger kind").selectOption("schedule_once");
  await inspector.getByLabel("Date and time").fill("2031-03-01T09:30");
  await inspector.getByLabel("UTC offset").fill("+02:00");
  assert.equal(await inspector.locator("[data-utc]").textContent(), "2031-03-01T07:30:00.000Z");
  await inspector.getByLabel("UTC offset").fill("2 hours");
  await inspector.getByText("Enter a date, a time and an offset like +02:00.").waitFor();
  assert.deepEqual(described(await violations(page)), []);
});

test("a subscription trigger takes the platform's event types and says when it fires", async () => {
  const page = await (await world.browser.newContext()).newPage();
  const environmentId = (await world.server.admin.environments.list().first()).data[0]!.id;
  await signIn(page, world.server.baseUrl, world.server.apiKey, `/console/automations/graphs/new?environment_id=${environmentId}`);
  await page.getByRole("toolbar", { name: "Graph" }).getByRole("button", { name: "Add Trigger" }).click();
  const inspector = page.getByRole("region", { name: "Inspector: trigger1" });
  await inspector.getByLabel("Trigger kind").selectOption("subscription");
  await inspector.getByLabel("Event types").pressSequentially("memory_store.*, session.status_idle");
  const words = inspector.locator("[data-trigger-words]");
  assert.equal((await words.textContent())?.trim(), "Fires on each platform event memory_store.*, session.status_idle.");
  await inspector.getByLabel("Only about").fill("sess_01jx0000000000000000000001");
  assert.equal(
    (await words.textContent())?.trim(),
    "Fires on each platform event memory_store.*, session.status_idle about sess_01jx0000000000000000000001.",
  );
  assert.deepEqual(described(await violations(page)), []);
});

test("memory blocks name a store and a path, a write always says what it expects, history blocks name their frontier, skill blocks their selection", async () => {
  const admin = world.server.admin;
  const environmentId = (await admin.environments.list().first()).data[0]!.id;
  const adminId = (await admin.principals.list().all()).find((p) => p.name === "admin")!.id;
  const store = await admin.memoryStores.create({ environment_id: environmentId, name: "notes", owner: { kind: "principal", id: adminId } });
  const bot = await admin.principals.create({ name: "curator", kind: "service" });
  const page = await (await world.browser.newContext({ viewport: { width: 1400, height: 1000 } })).newPage();
  await signIn(page, world.server.baseUrl, world.server.apiKey, `/console/automations/graphs/new?environment_id=${environmentId}`);
  await page.getByLabel("Name", { exact: true }).fill("curate-notes");
  await page.getByLabel("Service principal").selectOption({ label: "curator" });
  const toolbar = page.getByRole("toolbar", { name: "Graph" });
  await toolbar.getByRole("button", { name: "Add Trigger" }).click();
  await toolbar.getByRole("button", { name: "Add Memory read" }).click();
  const read = page.getByRole("region", { name: "Inspector: memory_read1" });
  await read.getByLabel("Memory store").selectOption({ label: `notes (${store.id})` });
  await read.getByLabel("Document path").fill("/n.md");
  await toolbar.getByRole("button", { name: "Add Memory write" }).click();
  const write = page.getByRole("region", { name: "Inspector: memory_write1" });
  await write.getByLabel("Memory store").selectOption({ label: `notes (${store.id})` });
  await write.getByLabel("Document path").fill("/n.md");
  await write.getByLabel("content: from node").selectOption("trigger1");
  await write.getByLabel("content: at pointer").fill("/t");
  // Create only by default; switching to "what a read saw" binds the read's sha.
  await write.getByLabel("Write only if").selectOption("read");
  await write.getByLabel("expected sha: from node").selectOption("memory_read1");
  assert.equal(await write.getByLabel("expected sha: at pointer").inputValue(), "/document/content_sha256");
  await shot(page, "graph-memory-write");
  assert.deepEqual(described(await violations(page)), []);
  await toolbar.getByRole("button", { name: "Add Select history" }).click();
  const select = page.getByRole("region", { name: "Inspector: select_history1" });
  await select.getByLabel("Frontier").fill("learn");
  await select.getByLabel("Most Sessions").fill("10");
  await toolbar.getByRole("button", { name: "Add Record history" }).click();
  const record = page.getByRole("region", { name: "Inspector: record_history1" });
  await record.getByLabel("Selection").selectOption("select_history1");
  await record.getByRole("checkbox", { name: "memory_write1" }).check();
  await toolbar.getByRole("button", { name: "Add Propose skill" }).click();
  const propose = page.getByRole("region", { name: "Inspector: skill_proposal1" });
  await propose.getByLabel("Learns from").selectOption("select_history1");
  await propose.getByLabel("SKILL.md: from node").selectOption("trigger1");
  await propose.getByLabel("SKILL.md: at pointer").fill("/skill");
  await toolbar.getByRole("button", { name: "Add Observe skill" }).click();
  await page.getByRole("region", { name: "Inspector: observe_skill_proposal1" }).getByLabel("Observes").selectOption("skill_proposal1");
  assert.deepEqual(described(await violations(page)), []);
  await page.getByRole("button", { name: "Save", exact: true }).click();
  await page.getByText(/^Saved revision 1\./).waitFor();
  const graph = (await admin.automationGraphs.list({ environment_id: environmentId }).all()).find((g) => g.name === "curate-notes")!;
  const doc = (await admin.automationGraphs.getRevision(graph.id, 1)).document as { nodes: Record<string, unknown>[] };
  const written = doc.nodes.find((n) => n["id"] === "memory_write1")!;
  assert.deepEqual(written["inputBindings"], {
    content: { sourceNodeId: "trigger1", pointer: "/t" },
    expectedSha256: { sourceNodeId: "memory_read1", pointer: "/document/content_sha256" },
  });
  assert.equal("expectedSha256" in written, false, "bound, not written");
  assert.deepEqual(
    doc.nodes.find((n) => n["id"] === "memory_read1"),
    { id: "memory_read1", kind: "step_memory_read", memoryStore: store.id, path: "/n.md" },
  );
  assert.deepEqual(doc.nodes.find((n) => n["id"] === "select_history1"), { id: "select_history1", kind: "step_select_history", frontier: "learn", limit: 10 });
  assert.deepEqual(doc.nodes.find((n) => n["id"] === "record_history1"), {
    id: "record_history1",
    kind: "step_record_history",
    selection: "select_history1",
    requires: ["memory_write1"],
  });
  assert.deepEqual(doc.nodes.find((n) => n["id"] === "skill_proposal1"), {
    id: "skill_proposal1",
    kind: "step_skill_proposal",
    selection: "select_history1",
    inputBindings: { content: { sourceNodeId: "trigger1", pointer: "/skill" } },
  });
  assert.deepEqual(doc.nodes.find((n) => n["id"] === "observe_skill_proposal1"), {
    id: "observe_skill_proposal1",
    kind: "step_observe_skill_proposal",
    proposal: "skill_proposal1",
  });
});
