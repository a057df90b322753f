// Skill proposals: the SKILL.md files graphs learnt, each with the firing
// that proposed it, for a person to read and adopt (the skill's next
// version, or a new skill) or reject. Only a human with manage decides; the
// API says so to anyone else.

import { api } from "../api.js";
import { EnvironmentPicker, useEnvironment } from "../env.js";
import { Action, Link, ListState, Status, When, useAsync } from "../ui.js";

export function SkillProposals() {
  const env = useEnvironment();
  const [proposals, reload] = useAsync(
    async () => (env.current ? api.skillProposals.list({ environment_id: env.current }).all(1_000) : []),
    [env.current],
  );
  return (
    <section>
      <h1>Skill proposals</h1>
      <p>
        <EnvironmentPicker env={env} /> <Link to={`/automations?environment_id=${env.current}`}>Automations</Link>
      </p>
      <ListState result={proposals} empty="No skill proposal in this Environment.">
        {(items) => (
          <ul class="plain">
            {items.map((p) => (
              <li key={p.id} class="card" data-skill-proposal={p.id}>
                <p>
                  <strong>{p.name}</strong> <Status value={p.status} /> {p.skill_id ? <>a new version of <code>{p.skill_id}</code></> : "a new skill"} · from{" "}
                  <Link to={`/automations/firings/${p.source.id}`}>{p.source.id}</Link> step <code>{p.source.step_id}</code> <When at={p.created_at} />
                </p>
                {p.adopted && (
                  <p>
                    Adopted as <code>{p.adopted.skill_id}</code> version {p.adopted.version}
                  </p>
                )}
                <details open={p.status === "open"}>
                  <summary>SKILL.md</summary>
                  <pre aria-label={`SKILL.md of ${p.id}`}>{p.content}</pre>
                </details>
                {p.status === "open" && (
                  <>
                    <Action
                      label="Adopt"
                      kind="primary"
                      run={async () => {
                        await api.skillProposals.adopt(p.id, {});
                        reload();
                      }}
                    />{" "}
                    <Action
                      label="Reject"
                      kind="danger"
                      run={async () => {
                        await api.skillProposals.reject(p.id, {});
                        reload();
                      }}
                    />
                  </>
                )}
              </li>
            ))}
          </ul>
        )}
      </ListState>
    </section>
  );
}
