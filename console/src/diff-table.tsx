// Two texts side by side, changed lines marked: agent versions and memory
// document versions both read this way.

import { useMemo } from "preact/hooks";
import { diffLines } from "./diff.js";

export function DiffTable(props: { label: string; leftTitle: string; rightTitle: string; left: string; right: string }) {
  const rows = useMemo(() => diffLines(props.left.split("\n"), props.right.split("\n")), [props.left, props.right]);
  const changed = rows.filter((r) => r.kind === "changed").length;
  return (
    <>
      <p class="muted" role="status">
        {changed === 0 ? "identical" : `${changed} changed line${changed === 1 ? "" : "s"}`}
      </p>
      <div class="table-wrap">
        <table class="diff" aria-label={props.label}>
          <thead>
            <tr>
              <th scope="col">{props.leftTitle}</th>
              <th scope="col">{props.rightTitle}</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r, i) => (
              <tr key={i} class={r.kind}>
                <td class={r.kind === "changed" && r.left !== null ? "del" : ""}>
                  <code>{r.left ?? ""}</code>
                </td>
                <td class={r.kind === "changed" && r.right !== null ? "add" : ""}>
                  <code>{r.right ?? ""}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}
