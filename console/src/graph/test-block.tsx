// Test this block: the prompt an Agent block would get, rendered by the
// API from the graph's saved sample (free: nothing is created), then Run
// once behind a confirmation — one ordinary Session, as the viewer, with
// that prompt as its first message, linked from here. It is not a firing.

import { useState } from "preact/hooks";
import { api, userMessage, type Schema } from "../api.js";
import { navigate } from "../router.js";
import { ErrorBox, Link } from "../ui.js";

type Preview = Schema<"NodeTestPreview">;

export function TestBlock(props: {
  graphId: string | null;
  revision: number | null;
  dirty: boolean;
  node: string;
  sampleEvent: unknown;
  sampleOutput: string;
  setSamples: (event: unknown, output: string) => void;
  principalId: string;
}) {
  const [eventText, setEventText] = useState(props.sampleEvent === undefined ? "" : JSON.stringify(props.sampleEvent, null, 2));
  const [preview, setPreview] = useState<Preview | null>(null);
  const [confirming, setConfirming] = useState(false);
  const [session, setSession] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const saved = props.graphId !== null && props.revision !== null;
  const test = async () => {
    setError(null);
    setPreview(null);
    setSession(null);
    try {
      const event = eventText.trim() ? (JSON.parse(eventText) as Record<string, unknown>) : undefined;
      setPreview(
        await api.automationGraphs.testNode(props.graphId ?? "", {
          mode: "prompt_preview",
          revision: props.revision ?? 0,
          node: props.node,
          event: event ?? null,
          previous_output: (props.sampleOutput || null) as never,
        }),
      );
    } catch (e) {
      setError(e);
    }
  };
  const runOnce = async () => {
    if (!preview) return;
    setError(null);
    try {
      // The preview promised an exact Agent version; a Session runs what its
      // Deployment pins now, so a repin since the preview must be seen first.
      const pinned = (await api.agentDeployments.get(preview.agent_deployment_id)).pins.agent_version;
      if (preview.agent_version != null && pinned !== preview.agent_version) {
        setConfirming(false);
        setPreview(null);
        setError(new Error(`The Deployment now pins agent version ${pinned}, not ${preview.agent_version}: render the prompt again before running it.`));
        return;
      }
      const s = await api.sessions.create({
        agent_deployment_id: preview.agent_deployment_id,
        title: `Test of ${preview.node} in graph ${preview.graph_id}`,
        metadata: { graph_node_test: { graph_id: preview.graph_id, revision: preview.revision, node: preview.node } },
        initial_events: [userMessage(props.principalId, preview.rendered_prompt)],
      });
      setConfirming(false);
      setSession(s.id);
    } catch (e) {
      setError(e);
    }
  };
  return (
    <details class="test-block">
      <summary>Test this block</summary>
      <label class="field">
        <span>Sample event (JSON, saved with the graph)</span>
        <textarea
          rows={4}
          value={eventText}
          onInput={(e) => setEventText(e.currentTarget.value)}
          onBlur={() => {
            try {
              props.setSamples(eventText.trim() ? JSON.parse(eventText) : undefined, props.sampleOutput);
            } catch {
              // kept as typed; Test says why it is not JSON
            }
          }}
        />
      </label>
      <label class="field">
        <span>Sample output of the previous Agent (for a block fed by an output edge)</span>
        <textarea rows={2} value={props.sampleOutput} onInput={(e) => props.setSamples(props.sampleEvent, e.currentTarget.value)} />
      </label>
      {!saved || props.dirty ? (
        <p class="hint">Save the graph first: a test renders a saved revision.</p>
      ) : (
        <button type="button" onClick={test}>
          Render the prompt
        </button>
      )}
      {error !== null && <ErrorBox error={error} />}
      {preview && (
        <div class="preview">
          <p>
            Prompt ({preview.prompt_source.replace("_", " ")}) for agent version {preview.agent_version ?? "—"} of <code>{preview.agent_deployment_id}</code>:
          </p>
          <pre class="rendered" data-rendered-prompt>
            {preview.rendered_prompt}
          </pre>
          {preview.missing_event_references.length > 0 && <p class="hint">Not in the sample (rendered empty): {preview.missing_event_references.join(", ")}</p>}
          {session ? (
            <p role="status">
              Started <Link to={`/sessions/${session}`}>{session}</Link>.{" "}
              <button type="button" onClick={() => navigate(`/sessions/${session}`)}>
                Open it
              </button>
            </p>
          ) : confirming ? (
            <div class="confirm" role="alertdialog" aria-label="Run once?">
              <p>
                Run this prompt once? It starts one ordinary Session <strong>as you</strong>, counted against your Budgets. It is not a firing of the
                Automation.
              </p>
              <button type="button" class="primary" onClick={runOnce}>
                Confirm: run once
              </button>{" "}
              <button type="button" onClick={() => setConfirming(false)}>
                Cancel
              </button>
            </div>
          ) : (
            <button type="button" onClick={() => setConfirming(true)}>
              Run once…
            </button>
          )}
        </div>
      )}
    </details>
  );
}
