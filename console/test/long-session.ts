// A Session with a long log, made through the API alone: each turn asks the
// scripted model for many calls of a tool the agent does not declare, so
// every call is answered at once by policy (no sandbox runs) and a turn
// adds about two events per call.

import type { Checkfu } from "../../sdk/typescript/src/index.js";
import { deploy, message } from "../../sdk/typescript/test/fixtures.js";
import { eventually } from "../../sdk/typescript/test/harness.js";

/** Calls per turn: a model answer is appended in one batch, and a batch holds at most 100 events. */
const CALLS_PER_TURN = 90;

/** Makes a Session of at least `events` events, idle at the end; answers its id and its last seq. */
export async function longSession(admin: Checkfu, events: number): Promise<{ sessionId: string; lastSeq: number; adminId: string; deploymentId: string }> {
  const d = await deploy(admin);
  const session = await admin.sessions.create({ agent_deployment_id: d.deployment.id, title: `${events.toLocaleString()} events` });
  const calls = Array.from({ length: CALLS_PER_TURN }, (_, i) => `call not_declared {"n": ${i}}`).join("\n");
  let lastSeq = 0;
  while (lastSeq < events) {
    await admin.sessions.sendEvent(session.id, message(d.adminId, calls) as never);
    const before = lastSeq;
    lastSeq = await eventually(
      async () => {
        const s = await admin.sessions.get(session.id);
        return s.status === "idle" && s.last_seq > before ? s.last_seq : undefined;
      },
      "the turn settles",
      120_000,
    );
  }
  return { sessionId: session.id, lastSeq, adminId: d.adminId, deploymentId: d.deployment.id };
}
