// The canvas: nodes as boxes and edges as arrows in one SVG. With a mouse:
// drag a box to move it, drag from its ● port onto another box to connect
// them, click to select. With a keyboard: Tab to a node or an edge, Enter
// selects it, arrow keys move a node (Shift: further), Delete removes it.
// A plan's errors are drawn on the node or edge they name.

import { useRef, useState } from "preact/hooks";
import { NODE_H, NODE_LABELS, NODE_W, position, type GraphDoc, type Layout, type NodeKind, type Point } from "./model.js";

export type Selection = { node: string } | { edge: number } | null;
export type Problems = { nodes: Map<string, string[]>; edges: Map<number, string[]> };

type Drag = { kind: "move"; id: string; from: Point; start: Point; moved: boolean } | { kind: "link"; id: string; at: Point };

const FINISH_DX = 70;

function summary(n: GraphDoc["nodes"][number]): string {
  switch (n.kind) {
    case "trigger":
      return String((n["trigger"] as { kind?: string } | undefined)?.kind ?? "");
    case "step_agent":
      return String(n["agent"] || "no agent yet");
    case "step_wait":
      return `${String(n["durationSeconds"] ?? "")} s`;
    case "step_connection":
      return String(n["tool"] || "no tool yet");
    case "step_check":
      return ((n["check"] as { questions?: { name?: string }[] } | undefined)?.questions ?? []).map((q) => q.name).join(", ") || "no questions yet";
    case "step_memory_read":
    case "step_memory_write":
      return String(n["path"] || "no path yet");
    case "step_select_history":
      return `after ${String(n["frontier"] || "?")}`;
    case "step_record_history":
      return `records ${String(n["selection"] || "?")}`;
    case "step_join":
      return `joins ${Object.keys((n["collect"] as Record<string, string> | undefined) ?? {}).length}`;
    default:
      return NODE_LABELS[n.kind as NodeKind] ?? n.kind;
  }
}

export function Canvas(props: {
  doc: GraphDoc;
  layout: Layout;
  selected: Selection;
  problems: Problems;
  select: (s: Selection) => void;
  move: (id: string, to: Point) => void;
  connect: (from: string, to: string) => void;
  removeNode: (id: string) => void;
  removeEdge: (index: number) => void;
}) {
  const svg = useRef<SVGSVGElement>(null);
  const [drag, setDrag] = useState<Drag | null>(null);
  const { doc, layout } = props;
  const at = (id: string) => position(layout, doc, id);
  const width = Math.max(900, ...doc.nodes.map((n) => at(n.id).x + NODE_W + FINISH_DX + 40));
  const height = Math.max(360, ...doc.nodes.map((n) => at(n.id).y + NODE_H + 40));

  const local = (e: PointerEvent): Point => {
    const box = svg.current?.getBoundingClientRect();
    return { x: e.clientX - (box?.left ?? 0), y: e.clientY - (box?.top ?? 0) };
  };
  const nodeAt = (e: PointerEvent): string | null => {
    const el = document.elementFromPoint(e.clientX, e.clientY)?.closest("[data-node]");
    return el?.getAttribute("data-node") ?? null;
  };

  const onMove = (e: PointerEvent) => {
    if (!drag) return;
    const p = local(e);
    if (drag.kind === "move") {
      const dx = p.x - drag.start.x;
      const dy = p.y - drag.start.y;
      if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 3) return;
      setDrag({ ...drag, moved: true });
      props.move(drag.id, { x: drag.from.x + dx, y: drag.from.y + dy });
    } else setDrag({ ...drag, at: p });
  };
  const onUp = (e: PointerEvent) => {
    if (!drag) return;
    if (drag.kind === "link") {
      const target = nodeAt(e);
      if (target && target !== drag.id) props.connect(drag.id, target);
    } else if (!drag.moved) props.select({ node: drag.id });
    setDrag(null);
  };

  const onNodeKey = (id: string) => (e: KeyboardEvent) => {
    const step = e.shiftKey ? 50 : 10;
    const p = at(id);
    const moves: Record<string, Point> = {
      ArrowLeft: { x: p.x - step, y: p.y },
      ArrowRight: { x: p.x + step, y: p.y },
      ArrowUp: { x: p.x, y: p.y - step },
      ArrowDown: { x: p.x, y: p.y + step },
    };
    const to = moves[e.key];
    if (to) {
      e.preventDefault();
      props.move(id, to);
    } else if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      props.select({ node: id });
    } else if (e.key === "Delete" || e.key === "Backspace") {
      e.preventDefault();
      props.removeNode(id);
    }
  };
  const onEdgeKey = (i: number) => (e: KeyboardEvent) => {
    if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      props.select({ edge: i });
    } else if (e.key === "Delete" || e.key === "Backspace") {
      e.preventDefault();
      props.removeEdge(i);
    }
  };

  const isSelected = (s: Selection) => JSON.stringify(s) === JSON.stringify(props.selected);

  return (
    <div class="canvas-wrap">
      <svg
        ref={svg}
        class="canvas"
        width={width}
        height={height}
        role="group"
        aria-label="Graph canvas"
        onPointerMove={onMove}
        onPointerUp={onUp}
        onPointerLeave={() => setDrag(null)}
      >
        <defs>
          <marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse">
            <path d="M 0 0 L 10 5 L 0 10 z" class="arrowhead" />
          </marker>
        </defs>
        {doc.edges.map((e, i) => {
          const a = at(e.from);
          const x1 = a.x + NODE_W;
          const y1 = a.y + NODE_H / 2 + (e.kind === "output" ? 8 : 0);
          const b = e.to ? at(e.to) : { x: x1 + FINISH_DX - 10, y: a.y + NODE_H / 2 - 10 };
          const x2 = e.to ? b.x : x1 + FINISH_DX - 12;
          const y2 = e.to ? b.y + NODE_H / 2 + (e.kind === "output" ? 8 : 0) : a.y + NODE_H + 6;
          const problems = props.problems.edges.get(i);
          const label = `edge ${e.kind}: ${e.from} → ${e.to ?? "finish"}${problems ? ` (plan: ${problems.join(", ")})` : ""}`;
          return (
            <g
              key={i}
              class={`edge edge-${e.kind}${problems ? " bad" : ""}${isSelected({ edge: i }) ? " selected" : ""}`}
              data-edge={i}
              data-problems={problems?.join(" ")}
              tabindex={0}
              role="button"
              aria-label={label}
              aria-pressed={isSelected({ edge: i })}
              onKeyDown={onEdgeKey(i)}
              onClick={() => props.select({ edge: i })}
            >
              <title>{label}</title>
              <line x1={x1} y1={y1} x2={x2} y2={y2} class="hit" />
              <line x1={x1} y1={y1} x2={x2} y2={y2} marker-end="url(#arrow)" />
              {!e.to && <circle cx={x2 + 6} cy={y2 + 4} r={6} class="finish" />}
              <text x={(x1 + x2) / 2} y={(y1 + y2) / 2 - 6} text-anchor="middle">
                {e.kind}
              </text>
            </g>
          );
        })}
        {drag?.kind === "link" && (
          <line class="linking" x1={at(drag.id).x + NODE_W} y1={at(drag.id).y + NODE_H / 2} x2={drag.at.x} y2={drag.at.y} />
        )}
        {doc.nodes.map((n) => {
          const p = at(n.id);
          const problems = props.problems.nodes.get(n.id);
          const kind = NODE_LABELS[n.kind as NodeKind] ?? n.kind;
          const brief = summary(n);
          const line = `${n.id} · ${brief.length > 14 ? `${brief.slice(0, 13)}…` : brief}`;
          // The accessible name holds the visible text, then what only the colour shows.
          const label = `${kind} ${line}${problems ? ` (plan: ${problems.join(", ")})` : ""}`;
          return (
            <g
              key={n.id}
              class={`node node-${n.kind}${problems ? " bad" : ""}${isSelected({ node: n.id }) ? " selected" : ""}`}
              transform={`translate(${p.x} ${p.y})`}
              data-node={n.id}
              data-problems={problems?.join(" ")}
              tabindex={0}
              role="button"
              aria-label={label}
              aria-pressed={isSelected({ node: n.id })}
              onKeyDown={onNodeKey(n.id)}
              onPointerDown={(e) => {
                if ((e.target as Element).classList.contains("port")) return;
                e.preventDefault();
                (e.currentTarget as Element).setPointerCapture?.(e.pointerId);
                setDrag({ kind: "move", id: n.id, from: p, start: local(e), moved: false });
              }}
            >
              <rect width={NODE_W} height={NODE_H} rx={8} />
              <text x={10} y={20}>
                <tspan class="node-kind">{kind}</tspan>{" "}
                <tspan x={10} y={40}>
                  {line}
                </tspan>
              </text>
              <circle
                class="port"
                cx={NODE_W}
                cy={NODE_H / 2}
                r={7}
                aria-hidden="true"
                onPointerDown={(e) => {
                  e.preventDefault();
                  e.stopPropagation();
                  setDrag({ kind: "link", id: n.id, at: local(e) });
                }}
              />
            </g>
          );
        })}
      </svg>
    </div>
  );
}
