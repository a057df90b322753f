import { Checkfu, type SessionEvent } from "../src/index.js";

/**
 * The README's first Session, with the SDK alone: an agent and its first
 * version, a sandbox profile and a model route pinned into a deployment, a
 * service principal granted `invoke` on the agent, and a Session acting as
 * it, streamed until the agent has answered.
 */
export async function journey(checkfu: Checkfu): Promise<SessionEvent[]> {
  // The bootstrap admin's Environment and identity.
  const [environment] = await checkfu.environments.list().all();
  if (!environment) throw new Error("no Environment is visible to this key");
  const admin = (await checkfu.principals.list().all()).find((p) => p.name === "admin");
  if (!admin) throw new Error("no admin principal");

  // 1. An agent, and its version 1.
  const agent = await checkfu.agents.create({
    environment_id: environment.id,
    name: "helper",
    draft: { instructions: "Be brief." },
  });
  const version = await checkfu.agents.publishVersion(agent.id);

  // 2. A sandbox profile and a model route (the scripted model needs no key).
  const sandbox = await checkfu.sandboxProfiles.create({ environment_id: environment.id, name: "default", image: "debian:12" });
  const route = await checkfu.modelRoutingProfiles.create({
    environment_id: environment.id,
    name: "scripted",
    candidates: [{ provider: "scripted", model: "scripted-1", effort: "low" }],
  });

  // 3. Pinned into a deployment.
  const deployment = await checkfu.agentDeployments.create({
    environment_id: environment.id,
    key: "helper",
    agent_id: agent.id,
    agent_version: version.version,
    model_routing_profile_id: route.id,
    sandbox_profile_id: sandbox.id,
  });

  // 4. A service principal for the work, granted invoke on the agent.
  const bot = await checkfu.principals.create({ kind: "service", name: "helper-bot" });
  await checkfu.permissionAssignments.create({
    subject: { kind: "principal", id: bot.id },
    permission: "invoke",
    resource: { kind: "agent", id: agent.id },
  });

  // 5. A Session acting as the bot, with a first message; streamed until idle.
  const session = await checkfu.sessions.create({
    agent_deployment_id: deployment.id,
    principal_id: bot.id,
    initial_events: [
      {
        type: "user.message",
        payload: { content: [{ type: "text", text: "hello" }] },
        authored_by: bot.id,
        caused_by: { kind: "principal", id: admin.id },
      },
    ],
  });
  const events: SessionEvent[] = [];
  for await (const item of checkfu.sessions.stream(session.id)) {
    if (item.kind !== "event") continue;
    events.push(item.event);
    if (item.event.type === "session.status_idle") break;
  }
  return events;
}
