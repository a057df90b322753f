// The same calls as wrong-body.ts with every required field: compiles cleanly.
import { Checkfu, type BodyOf, type Op } from "../src/index.js";

type CreateSession = BodyOf<Op<"sessions.createSession">>;

export const session: CreateSession = { agent_deployment_id: "dep_01jx0000000000000000000000", principal_id: "prin_01jx0000000000000000000000" };

export async function create(checkfu: Checkfu): Promise<void> {
  await checkfu.agents.create({ name: "helper", environment_id: "env_01jx0000000000000000000000" });
  await checkfu.call("principals.createPrincipal", { body: { name: "bot", kind: "service" } });
}
