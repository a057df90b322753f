// §19.2 acceptance 3: the seed's graph document (a schedule, Agent A, Parse
// JSON, a Decision and Agent B) saves, plans, applies and fires through the
// SDK, typed as the seed writes it: `BodyOf<Op<"automationGraphs.createAutomationGraph">>`.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { BodyOf, Checkfu, Op } from "../src/index.js";
import { eventually, startCheckfu, type Server } from "./harness.js";

let server: Server;
before(async () => {
  server = await startCheckfu();
});
after(async () => {
  await server?.stop();
});

/** An agent with one deployment (a graph's Agent node may name the agent). */
async function deployedAgent(checkfu: Checkfu, environmentId: string, name: string, routeId: string, sandboxId: string) {
  const agent = await checkfu.agents.create({ environment_id: environmentId, name, draft: { instructions: `You are ${name}.` } });
  const version = await checkfu.agents.publishVersion(agent.id);
  await checkfu.agentDeployments.create({
    environment_id: environmentId,
    key: name,
    agent_id: agent.id,
    agent_version: version.version,
    model_routing_profile_id: routeId,
    sandbox_profile_id: sandboxId,
  });
  return agent;
}

test("the seed's graph document saves, plans, applies and fires", async () => {
  const checkfu = server.admin;
  const environment = (await checkfu.environments.list().first()).data[0]!;
  const author = (await checkfu.principals.list().all()).find((p) => p.name === "admin")!;
  const servicePrincipal = await checkfu.principals.create({ kind: "service", name: "triage-bot" });
  const route = await checkfu.modelRoutingProfiles.create({
    environment_id: environment.id,
    name: "scripted",
    candidates: [{ provider: "scripted", model: "scripted-1", effort: "low" }],
  });
  const sandbox = await checkfu.sandboxProfiles.create({ environment_id: environment.id, name: "default", image: "debian:12" });
  const triageAgent = await deployedAgent(checkfu, environment.id, "triage", route.id, sandbox.id);
  const escalationAgent = await deployedAgent(checkfu, environment.id, "escalation", route.id, sandbox.id);
  for (const agent of [triageAgent, escalationAgent]) {
    await checkfu.permissionAssignments.create({
      subject: { kind: "principal", id: servicePrincipal.id },
      permission: "invoke",
      resource: { kind: "agent", id: agent.id },
    });
  }

  // The seed's example, as it is written there (its Outcome node aside:
  // Outcome nodes run with the executable Automations of §18).
  type CreateGraphInput = BodyOf<Op<"automationGraphs.createAutomationGraph">>;
  const document: CreateGraphInput["document"] = {
    name: "triage-and-escalate",
    environment_id: environment.id,
    service_principal_id: servicePrincipal.id,
    nodes: [
      { kind: "trigger", id: "weekday", trigger: { kind: "schedule", cron: "0 9 * * 1-5", timezone: "UTC" } },
      { kind: "step_agent", id: "triage", agent: triageAgent.id, prompt: 'Review the queue and return JSON with an "escalate" boolean.' },
      {
        kind: "step_parse_json",
        id: "triage_json",
        inputBindings: { content: { sourceNodeId: "triage", pointer: "" } },
        outputSchema: {
          type: "object",
          properties: { escalate: { type: "boolean" } },
          required: ["escalate"],
          additionalProperties: false,
        },
      },
      {
        kind: "decision",
        id: "route",
        inputBindings: { escalate: { sourceNodeId: "triage_json", pointer: "/escalate" } },
        condition: { kind: "predicates", predicates: [{ kind: "equals", pointer: "/escalate", value: true }] },
      },
      { kind: "step_agent", id: "escalate", agent: escalationAgent.id, prompt: "unused when previous output is selected" },
    ],
    edges: [
      { kind: "starts", from: "weekday", to: "triage" },
      { kind: "then", from: "triage", to: "triage_json" },
      { kind: "output", from: "triage", to: "triage_json" },
      { kind: "then", from: "triage_json", to: "route" },
      { kind: "output", from: "triage_json", to: "route" },
      { kind: "continue", from: "route", to: "escalate" },
      { kind: "otherwise", from: "route", to: null },
      { kind: "output", from: "triage", to: "escalate" },
    ],
  };

  const createKey = crypto.randomUUID();
  const graph = await checkfu.automationGraphs.create({ created_by_principal_id: author.id, document }, { idempotencyKey: createKey });
  assert.equal(graph.latest_revision, 1);
  // A retry of the unchanged request with its key answers the same graph.
  const again = await checkfu.automationGraphs.create({ created_by_principal_id: author.id, document }, { idempotencyKey: createKey });
  assert.equal(again.id, graph.id);
  assert.equal((await checkfu.automationGraphs.list().all()).length, 1, "one graph, not two");

  const revision = await checkfu.automationGraphs.getRevision(graph.id, "1");
  assert.deepEqual(revision.document, document, "the saved document is the one sent");

  const plan = await checkfu.automationGraphs.plan(graph.id, { revision: 1 });
  assert.equal(plan.kind, "planned", JSON.stringify(plan));
  assert.deepEqual(plan.blockers, []);
  assert.equal(plan.target_kind, "steps");
  const applied = await checkfu.automationGraphs.apply(graph.id, { revision: 1, plan_sha256: plan.plan_sha256! });
  assert.equal(applied.action, "create");

  const automation = await checkfu.automations.get(applied.automation_id);
  assert.equal(automation.status, "active");
  const firing = await checkfu.automations.fire(applied.automation_id, {});
  const settled = await eventually(async () => {
    const f = await checkfu.automationFirings.get(firing.id);
    return f.state === "running" || f.state === "pending" ? undefined : f;
  }, "the firing to settle", 60_000);

  // Agent A ran as the service principal; the scripted model answers
  // `echo: <prompt>`, which is not JSON, so Parse JSON fails before the
  // Decision and Agent B: the graph's own rule, applied as written.
  const trace = await checkfu.automationFirings.getTrace(firing.id);
  const outcome = (step: string) => (trace.firing.program as { steps: { id: string; outcome: { kind: string; reason?: string } | null }[] }).steps.find((s) => s.id === step)?.outcome;
  assert.equal(outcome("triage")?.kind, "completed", JSON.stringify(trace));
  assert.deepEqual(outcome("triage_json"), { kind: "failed", reason: "invalid_json" });
  assert.notEqual(outcome("escalate")?.kind, "completed");
  assert.equal(settled.state, "failed");
  assert.equal(settled.child_session_ids.length, 1, "Agent A's child Session, and no other");
  const child = await checkfu.sessions.get(settled.child_session_ids[0]!);
  assert.equal(child.principal_id, servicePrincipal.id);
  const first = (await checkfu.sessions.listEvents(child.id, { "types[]": ["user.message"] }).first()).data[0];
  assert.deepEqual(first?.payload["content"], [{ type: "text", text: 'Review the queue and return JSON with an "escalate" boolean.' }]);
});
