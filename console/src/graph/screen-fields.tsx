// An Agent step's delivery screen: every message its children write is held
// for a qualified model's verdict and stored only when released. The form
// writes the graph's `deliveryScreen`; unticked, the node has none.

import { Field } from "./fields.js";
import type { NodeDoc } from "./model.js";

type ScreenDoc = { modelRoutingProfileId: string; instructions: string; tier?: string; onFailure?: string };

const TIERS = ["minimal", "low", "medium", "high", "max"];

export function DeliveryScreenFields(props: { node: NodeDoc; change: (n: NodeDoc) => void }) {
  const n = props.node;
  const s = n["deliveryScreen"] as ScreenDoc | undefined;
  const set = (next: ScreenDoc | undefined) => props.change({ ...n, deliveryScreen: next });
  return (
    <fieldset class="predicate">
      <legend>Delivery screen</legend>
      <label class="check">
        <input type="checkbox" checked={s !== undefined} onChange={(e) => set(e.currentTarget.checked ? { modelRoutingProfileId: "", instructions: "", onFailure: "fail_closed" } : undefined)} />{" "}
        Screen every message before it is delivered
      </label>
      {s && (
        <>
          <Field label="Screen routing profile" hint="mrp_… of a profile qualified for delivery_screen">
            <input value={s.modelRoutingProfileId} onInput={(e) => set({ ...s, modelRoutingProfileId: e.currentTarget.value.trim() })} />
          </Field>
          <Field label="Screen instructions" hint="What the screen blocks; up to 16 KiB">
            <textarea rows={3} value={s.instructions} onInput={(e) => set({ ...s, instructions: e.currentTarget.value })} />
          </Field>
          <Field label="Screen effort" hint="Empty keeps the route's">
            <select value={s.tier ?? ""} onChange={(e) => set({ ...s, tier: e.currentTarget.value || undefined })}>
              <option value="">the route's</option>
              {TIERS.map((t) => (
                <option key={t} value={t}>
                  {t}
                </option>
              ))}
            </select>
          </Field>
          <Field label="If the screen fails" hint="Closed withholds the message; open delivers it">
            <select value={s.onFailure ?? "fail_closed"} onChange={(e) => set({ ...s, onFailure: e.currentTarget.value })}>
              <option value="fail_closed">withhold (fail closed)</option>
              <option value="fail_open">deliver (fail open)</option>
            </select>
          </Field>
        </>
      )}
    </fieldset>
  );
}
