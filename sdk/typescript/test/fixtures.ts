// What several tests set up: a deployment of a fresh agent on the scripted
// model, in the bootstrap Environment.

import type { Checkfu, Schema } from "../src/index.js";

export interface Deployed {
  environmentId: string;
  adminId: string;
  agent: Schema<"Agent">;
  deployment: Schema<"AgentDeployment">;
}

let counter = 0;

export async function deploy(checkfu: Checkfu): Promise<Deployed> {
  const n = ++counter;
  const environmentId = (await checkfu.environments.list().first()).data[0]!.id;
  const adminId = (await checkfu.principals.list().all()).find((p) => p.name === "admin")!.id;
  const agent = await checkfu.agents.create({ environment_id: environmentId, name: `agent-${n}`, draft: { instructions: "Be brief." } });
  const version = await checkfu.agents.publishVersion(agent.id);
  const route = await checkfu.modelRoutingProfiles.create({
    environment_id: environmentId,
    name: `scripted-${n}`,
    candidates: [{ provider: "scripted", model: "scripted-1", effort: "low" }],
  });
  const sandbox = await checkfu.sandboxProfiles.create({ environment_id: environmentId, name: `sandbox-${n}`, image: "debian:12" });
  const deployment = await checkfu.agentDeployments.create({
    environment_id: environmentId,
    key: `agent-${n}`,
    agent_id: agent.id,
    agent_version: version.version,
    model_routing_profile_id: route.id,
    sandbox_profile_id: sandbox.id,
  });
  return { environmentId, adminId, agent, deployment };
}

/** A user.message input from `principalId`. */
export function message(principalId: string, text: string) {
  return {
    type: "user.message" as const,
    payload: { content: [{ type: "text", text }] },
    authored_by: principalId,
    caused_by: { kind: "principal", id: principalId },
  };
}
