// The history blocks' inspector: a selection names its frontier and how
// many Sessions it takes; a record names the selection it moves past and
// the steps whose completion it waits for.

import { Choice, Field } from "./fields.js";
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
