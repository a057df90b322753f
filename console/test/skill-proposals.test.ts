// Skill proposals in the console: a graph learns a SKILL.md from the
// Sessions it selected and proposes it; the proposal shows with its text
// and the firing that made it, and Adopt makes the skill.

import assert from "node:assert/strict";
import { test } from "node:test";
import { deploy, message } from "../../sdk/typescript/test/fixtures.js";
import { eventually } from "../../sdk/typescript/test/harness.js";
import { described, live, shot, signIn, violations } from "./browser.js";

const world = live();

const SKILL = "---\nname: triage-notes\ndescription: How the team triages incoming notes\n---\n# Triage\nRead, then sort.\n";

test("a skill proposal is read and adopted", async () => {
  const admin = world.server.admin;
  const d = await deploy(admin);
  const session = await admin.sessions.create({ agent_deployment_id: d.deployment.id, initial_events: [message(d.adminId, "hi")] });
  await eventually(async () => ((await admin.sessions.get(session.id)).status === "idle" ? true : undefined), "the Session idles");
  const bot = await admin.principals.create({ name: "curator-bot", kind: "service" });
  await admin.permissionAssignments.create({ subject: { kind: "principal", id: bot.id }, permission: "read", resource: { kind: "environment", id: d.environmentId } });
  const graph = await admin.automationGraphs.create({
    created_by_principal_id: d.adminId,
    document: {
      name: "learn",
      environment_id: d.environmentId,
      service_principal_id: bot.id,
      nodes: [
        { kind: "trigger", id: "hook", trigger: { kind: "webhook", dedupe_key: "/id" } },
        { kind: "step_select_history", id: "sel", frontier: "learn", limit: 10 },
        { kind: "step_skill_proposal", id: "prop", selection: "sel", inputBindings: { content: { sourceNodeId: "hook", pointer: "/skill" } } },
      ],
      edges: [
        { kind: "starts", from: "hook", to: "sel" },
        { kind: "then", from: "sel", to: "prop" },
      ],
    },
  });
  const plan = await admin.automationGraphs.plan(graph.id, { revision: 1 });
  const applied = await admin.automationGraphs.apply(graph.id, { revision: 1, plan_sha256: plan.plan_sha256! });
  await admin.automations.fire(applied.automation_id!, { event: { id: "1", skill: SKILL } });
  const proposal = await eventually(
    async () => (await admin.skillProposals.list({ environment_id: d.environmentId }).all()).find((p) => p.name === "triage-notes"),
    "the proposal",
  );

  const page = await (await world.browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  await signIn(page, world.server.baseUrl, world.server.apiKey, `/console/automations?environment_id=${d.environmentId}`);
  await page.getByRole("link", { name: "Skill proposals" }).click();
  const card = page.locator(`[data-skill-proposal="${proposal.id}"]`);
  await card.getByText("a new skill").waitFor();
  assert.equal(await card.getByLabel(`SKILL.md of ${proposal.id}`).textContent(), SKILL);
  await shot(page, "skill-proposal");
  assert.deepEqual(described(await violations(page)), []);
  await card.getByRole("button", { name: "Adopt" }).click();
  await card.getByText(/^Adopted as skl_/).waitFor();
  const adopted = await admin.skillProposals.get(proposal.id);
  assert.equal(adopted.status, "adopted");
  assert.equal((await admin.skills.get(adopted.adopted!.skill_id)).name, "triage-notes");
});
