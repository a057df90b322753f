// The history and Skill blocks' inspectors: a selection names its frontier
// and how many Sessions it takes; a record names the selection it moves
// past and the steps whose completion it waits for; a Skill proposal learns
// from a selection and binds its SKILL.md; an observation names the
// proposal it reads.

import { BindingFields, Choice, Field, type Binding } from "./fields.js";
import type { GraphDoc, NodeDoc } from "./model.js";

export function SelectHistoryInspector(props: { node: NodeDoc; change: (n: NodeDoc) => void }) {
  const n = props.node;
  const agents = ((n["agents"] as string[] | undefined) ?? []).join(", ");
  return (
    <>
      <Field label="Frontier" hint="A name: a-z, 0-9, _ and -. The next firing selects Sessions created after where it stands.">
        <input value={String(n["frontier"] ?? "")} onInput={(e) => props.change({ ...n, frontier: e.currentTarget.value })} />
      </Field>
      <Field label="Most Sessions" hint="1 to 100, oldest first">
        <input type="number" min={1} max={100} value={Number(n["limit"] ?? 20)} onInput={(e) => props.change({ ...n, limit: Number(e.currentTarget.value) })} />
      </Field>
      <Field label="Only of these agents (optional)" hint="agt_… ids, comma-separated">
        <input
          value={agents}
          onChange={(e) => {
            const ids = e.currentTarget.value.split(",").map((s) => s.trim()).filter(Boolean);
            const { agents: _old, ...rest } = n;
            props.change(ids.length ? { ...n, agents: ids } : (rest as NodeDoc));
          }}
        />
      </Field>
    </>
  );
}

export function RecordHistoryInspector(props: { node: NodeDoc; doc: GraphDoc; change: (n: NodeDoc) => void }) {
  const n = props.node;
  const requires = (n["requires"] as string[] | undefined) ?? [];
  const steps = props.doc.nodes.filter((x) => x.id !== n.id && x.kind.startsWith("step_") && x.kind !== "step_select_history");
  return (
    <>
      <Choice
        label="Selection"
        hint="The Select history block whose Sessions this records as processed"
        value={String(n["selection"] ?? "")}
        options={props.doc.nodes.filter((x) => x.kind === "step_select_history").map((x) => x.id)}
        change={(selection) => props.change({ ...n, selection })}
      />
      <fieldset>
        <legend>Moves the frontier only when these completed</legend>
        {steps.map((s) => (
          <label key={s.id}>
            <input
              type="checkbox"
              checked={requires.includes(s.id)}
              onChange={(e) =>
                props.change({ ...n, requires: e.currentTarget.checked ? [...requires, s.id] : requires.filter((r) => r !== s.id) })
              }
            />{" "}
            {s.id}
          </label>
        ))}
      </fieldset>
      <p class="hint">Otherwise it is skipped and the next firing selects the same Sessions again.</p>
    </>
  );
}

export function SkillProposalInspector(props: { node: NodeDoc; doc: GraphDoc; change: (n: NodeDoc) => void }) {
  const n = props.node;
  const bindings = (n["inputBindings"] ?? {}) as Record<string, Binding>;
  return (
    <>
      <Choice
        label="Learns from"
        hint="A Select history block: an empty selection proposes nothing"
        value={String(n["selection"] ?? "")}
        options={props.doc.nodes.filter((x) => x.kind === "step_select_history").map((x) => x.id)}
        change={(selection) => props.change({ ...n, selection })}
      />
      <Field label="Skill (optional)" hint="skl_… to propose its next version; empty: the skill the SKILL.md names">
        <input
          value={String(n["skill"] ?? "")}
          onInput={(e) => {
            const { skill: _old, ...rest } = n;
            const v = e.currentTarget.value.trim();
            props.change(v ? { ...n, skill: v } : (rest as NodeDoc));
          }}
        />
      </Field>
      <BindingFields
        name="SKILL.md"
        binding={bindings["content"] ?? {}}
        doc={props.doc}
        self={n.id}
        change={(b) => props.change({ ...n, inputBindings: { ...bindings, content: b } })}
      />
      <p class="hint">Nothing changes until a person adopts the proposal (Automations → Skill proposals).</p>
    </>
  );
}

export function ObserveSkillInspector(props: { node: NodeDoc; doc: GraphDoc; change: (n: NodeDoc) => void }) {
  const n = props.node;
  return (
    <Choice
      label="Observes"
      hint="The Propose skill block it reads once: empty, pending or evidence (adopted)"
      value={String(n["proposal"] ?? "")}
      options={props.doc.nodes.filter((x) => x.kind === "step_skill_proposal").map((x) => x.id)}
      change={(proposal) => props.change({ ...n, proposal })}
    />
  );
}
