// §20.2 Governance, through the console: Principals and Groups, an API key
// whose secret is shown once (and works), a grant read back as "who can do
// what on what" and filtered by the URL, a policy and its evaluate dry run,
// and the audit log filtered to one resource.

import assert from "node:assert/strict";
import { test } from "node:test";
import { Checkfu } from "../../sdk/typescript/src/index.js";
import { described, live, shot, signIn, violations } from "./browser.js";

const world = live();

test("principals, groups, keys, grants, policies and the audit log", async () => {
  const admin = world.server.admin;
  const environment = (await admin.environments.list().first()).data[0]!;
  const page = await (await world.browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  await signIn(page, world.server.baseUrl, world.server.apiKey, "/console/governance");

  // A person and a group with them in it.
  const newPrincipal = page.getByRole("form", { name: "New principal" });
  await newPrincipal.getByLabel("Name").fill("alice");
  await newPrincipal.getByRole("button", { name: "Create principal" }).click();
  await page.getByRole("link", { name: "alice" }).waitFor();
  const alice = (await admin.principals.list().all()).find((p) => p.name === "alice")!;
  assert.equal(alice.kind, "human");
  const newGroup = page.getByRole("form", { name: "New group" });
  await newGroup.getByLabel("Name").fill("oncall");
  await newGroup.getByRole("button", { name: "Create group" }).click();
  const group = page.locator('[data-group="oncall"]');
  await group.getByLabel("Principal to add to oncall").selectOption({ label: "alice" });
  await group.getByRole("button", { name: "Add to oncall" }).click();
  await group.getByRole("button", { name: "Remove alice" }).waitFor();
  const oncall = (await admin.groups.list().all()).find((g) => g.name === "oncall")!;
  assert.deepEqual(oncall.member_ids, [alice.id]);
  await shot(page, "governance-principals");

  // Her key: the secret once, then never again; it works until revoked.
  await page.getByRole("link", { name: "alice" }).click();
  await page.getByRole("heading", { name: "alice" }).waitFor();
  const newKey = page.getByRole("form", { name: "New API key" });
  await newKey.getByLabel("Key name").fill("laptop");
  await newKey.getByRole("button", { name: "Create key" }).click();
  const secret = await page.getByLabel("New key's secret").inputValue();
  assert.match(secret, /^\S{20,}$/);
  await shot(page, "governance-key");
  const asAlice = new Checkfu({ baseUrl: world.server.baseUrl, apiKey: secret });
  assert.equal((await asAlice.consoleSessions.create({ api_key: secret }).catch((e: unknown) => e)) instanceof Error, false);
  await page.reload();
  await page.locator('[data-key="laptop"]').waitFor();
  assert.equal(await page.getByLabel("New key's secret").count(), 0, "after a reload the secret is gone");
  assert.ok(!(await page.content()).includes(secret), "the page holds the secret no more");
  page.once("dialog", (dialog) => void dialog.accept());
  await page.getByRole("button", { name: "Revoke laptop" }).click();
  await page.locator('[data-key="laptop"] .status-revoked').waitFor();
  const revoked = await asAlice.consoleSessions.create({ api_key: secret }).catch((e: unknown) => e);
  assert.equal((revoked as { status?: number }).status, 401, "the revoked key no longer signs in");

  // A grant, read as a sentence, found by the URL's filter.
  await page.goto(`${world.server.baseUrl}/console/governance/grants`);
  const grant = page.getByRole("form", { name: "New grant" });
  await grant.getByLabel("Subject id").fill(alice.id);
  await grant.getByLabel("Permission").selectOption("read");
  await grant.getByLabel("Resource id").fill(environment.id);
  await grant.getByRole("button", { name: "Grant" }).click();
  // Navigating away at once would cancel the grant's request in flight.
  await page.locator(".grants li", { hasText: "alice (principal) may read" }).first().waitFor();
  await page.goto(`${world.server.baseUrl}/console/governance/grants?subject_id=${alice.id}`);
  // Names are resolved after the row first shows its ids.
  const sentence = page.locator(".grants li", { hasText: `alice (principal) may read on environment ${environment.name}` }).first();
  await sentence.waitFor();
  assert.match((await sentence.textContent()) ?? "", new RegExp(`^alice \\(principal\\) may read on environment ${environment.name}`));
  assert.equal(await page.locator(".grants li").count(), 1, "only alice's grant");
  assert.equal(await page.getByLabel("Who").inputValue(), alice.id, "the filter is the URL's");
  const grants = await admin.permissionAssignments.list({ subject_id: alice.id }).all();
  assert.deepEqual(
    grants.map((g) => [g.permission, g.resource.id]),
    [["read", environment.id]],
  );
  await shot(page, "governance-grants");

  // A policy that gates bash, and the dry run saying so.
  await page.goto(`${world.server.baseUrl}/console/governance/policies`);
  const policy = page.getByRole("form", { name: "New policy" });
  await policy.getByLabel("Name", { exact: true }).fill("gate-bash");
  await policy.getByRole("button", { name: "Create policy" }).click();
  await page.locator('[data-policy="gate-bash"]').waitFor();
  const evaluate = page.getByRole("form", { name: "Evaluate an action" });
  await evaluate.getByLabel("Principal id").fill(alice.id);
  await evaluate.getByLabel("Built-in tool").selectOption("bash");
  await evaluate.getByRole("button", { name: "Evaluate" }).click();
  const answer = page.locator(".evaluation");
  await answer.waitFor();
  assert.match((await answer.textContent()) ?? "", /require_approval/);
  const direct = await admin.actionPolicies.evaluate({
    environment_id: environment.id,
    subject: { kind: "principal", id: alice.id },
    permission: "invoke",
    resource: { kind: "tool", id: "bash" },
    tool: { type: "builtin", name: "bash" },
  });
  assert.equal(direct.disposition, "require_approval", "the page shows what the API answers");
  await shot(page, "governance-policies");

  // The audit log of alice: her creation and her key's.
  await page.goto(`${world.server.baseUrl}/console/governance/audit?resource_id=${alice.id}`);
  const rows = page.getByRole("table", { name: "Audit records" }).locator("tbody tr");
  await rows.first().waitFor();
  const actions = await rows.locator("td:nth-child(3)").allTextContents();
  const direct2 = await admin.auditEvents.list({ resource_id: alice.id }).all();
  assert.deepEqual(actions, direct2.map((e) => e.action), "the same records, in the same order");
  assert.ok(actions.length >= 1);
  await shot(page, "governance-audit");
  assert.deepEqual(described(await violations(page)), []);
});

test("an error shows the API's type and request id", async () => {
  const page = await (await world.browser.newContext()).newPage();
  await signIn(page, world.server.baseUrl, world.server.apiKey, "/console/governance/principals/prin_01jzzzzzzzzzzzzzzzzzzzzzzz");
  const error = page.getByRole("alert");
  await error.waitFor();
  const text = (await error.textContent()) ?? "";
  assert.match(text, /not_found/);
  assert.match(text, /request_id: \S+/);
});
