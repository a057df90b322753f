// Compiled by test/typecheck.test.ts, which expects an error on each line
// marked `expect-error: <field>` naming that field, and no other error.
import { Checkfu, type BodyOf, type Op } from "../src/index.js";

type CreateSession = BodyOf<Op<"sessions.createSession">>;

export const session: CreateSession = { principal_id: "prin_01jx0000000000000000000000" }; // expect-error: agent_deployment_id

export async function create(checkfu: Checkfu): Promise<void> {
  await checkfu.agents.create({ name: "helper" }); // expect-error: environment_id
  await checkfu.call("principals.createPrincipal", { body: { name: "bot" } }); // expect-error: kind
}
