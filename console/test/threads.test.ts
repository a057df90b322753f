// The Session page's other facts: a tab per thread of a multiagent
// Session (the child's own transcript), its Outcome with each evaluation,
// and its Budget's use.

import assert from "node:assert/strict";
import { test } from "node:test";
import { deploy, message } from "../../sdk/typescript/test/fixtures.js";
import { eventually } from "../../sdk/typescript/test/harness.js";
import { described, live, shot, signIn, violations } from "./browser.js";

const world = live();

test("thread tabs, Outcome evaluations and Budget use", async () => {
  const admin = world.server.admin;
  const member = await deploy(admin);
  const coordinator = await admin.agents.create({
    environment_id: member.environmentId,
    name: "coordinator",
    draft: { instructions: "Delegate.", multiagent: { type: "coordinator", agents: [member.agent.id] } },
  } as never);
  const version = await admin.agents.publishVersion(coordinator.id);
  // The coordinator may spawn its member.
  await admin.permissionAssignments.create({
    subject: { kind: "agent_definition", id: coordinator.id },
    permission: "use_agent",
    resource: { kind: "agent", id: member.agent.id },
  });
  const deployment = await admin.agentDeployments.create({
    environment_id: member.environmentId,
    key: "coordinator",
    agent_id: coordinator.id,
    agent_version: version.version,
    model_routing_profile_id: member.deployment.pins.model_routing_profile_id,
    sandbox_profile_id: member.deployment.pins.sandbox_profile_id,
  });
  const session = await admin.sessions.create({
    agent_deployment_id: deployment.id,
    title: "delegating",
    budget: { limit: 1_000_000, metric: "model_tokens" },
    initial_events: [
      {
        type: "user.define_outcome",
        authored_by: member.adminId,
        caused_by: { kind: "principal", id: member.adminId },
        payload: { description: "Say hello", rubric: "require: hello", max_iterations: 2 },
      },
    ],
  } as never);
  await eventually(async () => ((await admin.sessions.get(session.id)).status === "idle" ? true : undefined), "the Outcome's turn ends");
  await admin.sessions.sendEvent(session.id, message(member.adminId, `call spawn_agent ${JSON.stringify({ agent_id: member.agent.id, message: "hello child" })}`) as never);
  const child = await eventually(async () => {
    const threads = await admin.sessions.listThreads(session.id).all();
    const c = threads.find((t) => t.parent_thread_id);
    return c && c.status === "idle" ? c : undefined;
  }, "the child answers");

  const page = await (await world.browser.newContext({ viewport: { width: 1280, height: 1000 } })).newPage();
  await signIn(page, world.server.baseUrl, world.server.apiKey, `/console/sessions/${session.id}`);
  const tabs = page.getByRole("tablist", { name: "Threads" });
  await tabs.waitFor();
  assert.deepEqual(
    (await tabs.getByRole("tab").allTextContents()).map((t) => t.replace(/\s*(idle|running)$/, "")),
    ["Coordinator", child.agent.name],
  );
  await tabs.getByRole("tab", { name: new RegExp(`^${child.agent.name}`) }).click();
  await page.locator('[data-type="agent.message"]', { hasText: "echo: hello child" }).waitFor();
  assert.ok(page.url().endsWith(`?thread=${child.id}`), "the thread is in the URL");
  assert.equal(await tabs.getByRole("tab", { selected: true }).count(), 1);

  const outcome = page.locator("[data-outcome]");
  await outcome.waitFor();
  assert.match((await outcome.textContent()) ?? "", /satisfied/);
  assert.ok((await outcome.getByRole("table").locator("tbody tr").count()) >= 1, "an evaluation row");
  const budget = await admin.budgets.get((await admin.sessions.get(session.id)).budget_id!);
  const meter = page.getByRole("meter", { name: "Budget used" });
  assert.equal(Number(await meter.getAttribute("value")), budget.consumed);
  assert.ok(budget.consumed > 0);
  await page.getByText(`of ${(1_000_000).toLocaleString("en-US")} model_tokens`).waitFor();
  await shot(page, "session-threads");
  assert.deepEqual(described(await violations(page)), []);
});
