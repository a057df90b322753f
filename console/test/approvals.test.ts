// §20.4 acceptance 4: a tool call that needs approval shows inline in the
// Session; Approve in the Approvals page and the Session resumes; a viewer
// without the right to answer sees no Approve button, and a direct POST
// with their console session is 403.

import assert from "node:assert/strict";
import { test } from "node:test";
import { message } from "../../sdk/typescript/test/fixtures.js";
import { eventually } from "../../sdk/typescript/test/harness.js";
import { live, shot, signIn } from "./browser.js";

const world = live();

test("approve a gated call from the inbox; a reader cannot", async () => {
  const admin = world.server.admin;
  const environmentId = (await admin.environments.list().first()).data[0]!.id;
  const adminId = (await admin.principals.list().all()).find((p) => p.name === "admin")!.id;
  const agent = await admin.agents.create({
    environment_id: environmentId,
    name: "writer",
    draft: { instructions: "Write files.", tools: [{ type: "builtin", name: "write" }] },
  } as never);
  const version = await admin.agents.publishVersion(agent.id);
  const route = await admin.modelRoutingProfiles.create({
    environment_id: environmentId,
    name: "scripted",
    candidates: [{ provider: "scripted", model: "scripted-1", effort: "low" }],
  });
  const sandbox = await admin.sandboxProfiles.create({ environment_id: environmentId, name: "default", image: "debian:12" });
  const deployment = await admin.agentDeployments.create({
    environment_id: environmentId,
    key: "writer",
    agent_id: agent.id,
    agent_version: version.version,
    model_routing_profile_id: route.id,
    sandbox_profile_id: sandbox.id,
  });
  const session = await admin.sessions.create({
    agent_deployment_id: deployment.id,
    title: "gated write",
    initial_events: [message(adminId, 'call write {"path": "out.txt", "content": "approved"}')],
  });
  const approval = await eventually(async () => {
    const list = await admin.approvals.list({ status: "pending", session_id: session.id }).all();
    return list[0];
  }, "the pending approval");

  // The reader: may read the Environment and invoke the agent, not approve.
  const reader = await admin.principals.create({ kind: "service", name: "reader" });
  const readerKey = await admin.apiKeys.create(reader.id, { name: "console" });
  for (const [permission, kind, id] of [
    ["read", "environment", environmentId],
    ["invoke", "agent", agent.id],
  ] as const) {
    await admin.permissionAssignments.create({ subject: { kind: "principal", id: reader.id }, permission, resource: { kind, id } });
  }
  const readerContext = await world.browser.newContext({ viewport: { width: 1280, height: 900 } });
  const readerPage = await readerContext.newPage();
  await signIn(readerPage, world.server.baseUrl, readerKey.secret!, `/console/sessions/${session.id}`);
  const inline = readerPage.locator(`[data-approval="${approval.id}"]`);
  await inline.waitFor();
  await inline.getByText("You may see this approval but not answer it.").waitFor();
  assert.equal(await inline.getByRole("button", { name: "Approve" }).count(), 0, "no Approve button for a reader");
  await readerPage.goto(`${world.server.baseUrl}/console/approvals`);
  await readerPage.getByText("Nothing waits for your answer.").waitFor();
  const jar = await readerContext.cookies();
  const direct = await fetch(`${world.server.baseUrl}/v1/action-approvals/${approval.id}/responses`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      cookie: jar.map((c) => `${c.name}=${c.value}`).join("; "),
      origin: new URL(world.server.baseUrl).origin,
      "checkfu-csrf": jar.find((c) => c.name === "checkfu_csrf")!.value,
    },
    body: JSON.stringify({ decision: "approve", response_token: "aprt_guessed" }),
  });
  assert.equal(direct.status, 403, "a direct POST from the reader's console session is refused");
  await readerContext.close();

  // The admin sees it inline, with its frozen context, and approves it in the inbox.
  const context = await world.browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  await signIn(page, world.server.baseUrl, world.server.apiKey, `/console/sessions/${session.id}`);
  const card = page.locator(`[data-approval="${approval.id}"]`);
  await card.getByRole("button", { name: "Approve" }).waitFor();
  await card.getByText('"path": "out.txt"').waitFor();
  await card.scrollIntoViewIfNeeded();
  await shot(page, "session-approval");
  await page.getByRole("link", { name: "Approvals" }).click();
  const row = page.locator(`[data-approval="${approval.id}"]`);
  await row.waitFor();
  await shot(page, "approvals");
  await row.getByRole("button", { name: "Approve" }).click();
  await page.getByText("Nothing waits for your answer.").waitFor();

  // The Session resumes: the write runs and the turn settles.
  await page.goto(`${world.server.baseUrl}/console/sessions/${session.id}`);
  await page.locator('[data-type="agent.tool_result"]').first().waitFor();
  await page.locator('[data-type="session.status_idle"]').nth(1).waitFor();
  const decided = await admin.approvals.get(approval.id);
  assert.equal(decided.status, "approved");
  await context.close();
});

test("the Approvals page at 390 px", async () => {
  const context = await world.browser.newContext({ viewport: { width: 390, height: 844 } });
  const page = await context.newPage();
  await signIn(page, world.server.baseUrl, world.server.apiKey, "/console/approvals");
  await page.getByRole("heading", { name: "Standing approvals" }).waitFor();
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `nothing wider than the screen (${overflow} px over)`);
  await context.close();
});
