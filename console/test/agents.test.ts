// §20.4 acceptance 3, through the console alone: create an agent, edit its
// draft, publish, compare two versions side by side, create the profiles
// and a deployment, start a Session and watch agent.message stream in.

import assert from "node:assert/strict";
import { test } from "node:test";
import { live, shot, signIn } from "./browser.js";

const world = live();

test("agent → version → deployment → Session, all in the console", async () => {
  const page = await (await world.browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  await signIn(page, world.server.baseUrl, world.server.apiKey, "/console/profiles");

  // The profiles a Deployment pins.
  const sandboxForm = page.getByRole("form", { name: "Create sandbox profile" });
  await sandboxForm.getByLabel("Name").fill("default");
  await sandboxForm.getByRole("button", { name: "Create sandbox profile" }).click();
  await page.getByText("default revision 1").waitFor();
  const routeForm = page.getByRole("form", { name: "Create model route" });
  await routeForm.getByLabel("Name").fill("scripted");
  await routeForm.getByRole("button", { name: "Create model route" }).click();
  await page.getByText("scripted/scripted-1 (low)").waitFor();
  await shot(page, "profiles");

  // An agent, its draft edited and published twice.
  await page.getByRole("link", { name: "Agents", exact: true }).first().click();
  const newAgent = page.getByRole("form", { name: "New agent" });
  await newAgent.getByLabel("Name").fill("helper");
  await newAgent.getByLabel("Instructions").fill("Be brief.");
  await newAgent.getByRole("button", { name: "Create agent" }).click();
  await page.getByRole("heading", { name: "helper" }).waitFor();
  await page.getByRole("button", { name: "Publish a version" }).click();
  await page.getByText(/^version 1 ·/).waitFor();
  await page.getByLabel("Instructions").fill("Be brief and kind.");
  await page.getByRole("checkbox", { name: "read" }).check();
  await page.getByRole("button", { name: "Save draft" }).click();
  await page.getByText("Draft saved.").waitFor();
  await page.getByRole("button", { name: "Publish a version" }).click();
  await page.getByText(/^version 2 ·/).waitFor();
  const diff = page.getByRole("table", { name: "Version 1 and version 2" });
  await diff.waitFor();
  await diff.locator("td.add", { hasText: "Be brief and kind." }).waitFor();
  await diff.locator("td.del", { hasText: '"Be brief."' }).waitFor();
  await diff.locator("td.add", { hasText: '"read"' }).waitFor();
  await page.getByRole("heading", { name: "Versions" }).scrollIntoViewIfNeeded();
  await page.evaluate(() => window.scrollBy(0, -60));
  await shot(page, "agent");

  // A deployment of version 2, and a Session of it.
  const newDeployment = page.getByRole("form", { name: "New deployment" });
  await newDeployment.getByLabel("Version").selectOption("2");
  await newDeployment.getByRole("button", { name: "Create deployment" }).click();
  const deployment = page.locator('[data-deployment="helper"]');
  await deployment.waitFor();
  await deployment.getByLabel("First message").fill("hello from the console");
  await deployment.getByRole("button", { name: "Start a Session" }).click();
  await page.getByRole("heading", { name: /sess_/ }).waitFor();
  await page.locator('[data-type="agent.message"]', { hasText: "hello from the console" }).waitFor();
  await page.locator('[data-type="session.status_idle"]').waitFor();

  // What the console did, as the API sees it.
  const environmentId = (await world.server.admin.environments.list().first()).data[0]!.id;
  const agents = await world.server.admin.agents.list({ environment_id: environmentId }).all();
  const helper = agents.find((a) => a.name === "helper")!;
  assert.equal(helper.latest_version, 2);
  const v2 = await world.server.admin.agents.getVersion(helper.id, 2);
  assert.equal((v2.definition as { instructions?: string }).instructions, "Be brief and kind.");
  const sessions = await world.server.admin.sessions.list({ environment_id: environmentId }).all();
  assert.equal(sessions.length, 1, "exactly one Session");
  const deployments = await world.server.admin.agentDeployments.list({ environment_id: environmentId }).all();
  assert.equal(deployments[0]!.pins.agent_version, 2);
  assert.equal(sessions[0]!.agent_deployment_id, deployments[0]!.id);
});
