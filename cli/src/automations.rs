//! `checkfu automation ...`: Automations from the command line, a client of
//! the public API like any other, each command with `--json`.

use crate::client::{Client, ClientArgs};
use crate::resolve::{self, AUTOMATION, DEPLOYMENT, PRINCIPAL};
use anyhow::Context;
use clap::Subcommand;
use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Clone, Subcommand)]
#[allow(clippy::large_enum_variant, reason = "parsed once per process from the command line")]
pub enum AutomationAction {
    /// List the Automations of the Environments you may read.
    List {
        #[arg(long)]
        environment: Option<String>,
        /// active or paused.
        #[arg(long)]
        status: Option<String>,
    },
    /// Show one Automation, its readiness evaluated now.
    Get { id: String },
    /// Create an Automation with an Agent target: fired manually, and by a
    /// schedule (`--cron` or `--at`), signed webhooks (`--webhook`) and/or
    /// the platform's own events (`--on-event`).
    Create {
        #[arg(long)]
        environment: Option<String>,
        #[arg(long)]
        name: String,
        /// The service Principal it runs as (you need act_as on it).
        #[arg(long)]
        service_principal: String,
        #[arg(long)]
        deployment: String,
        /// The child's first message; `{{event.x}}` is filled from the event.
        #[arg(long)]
        prompt: String,
        /// A cron pattern (5 fields, or 6 with leading seconds).
        #[arg(long, conflicts_with = "at")]
        cron: Option<String>,
        /// The IANA time zone `--cron` is read in.
        #[arg(long, default_value = "UTC", requires = "cron")]
        timezone: String,
        /// Fire once at this RFC 3339 time (with its offset).
        #[arg(long)]
        at: Option<String>,
        /// Take signed webhook events, deduplicated by the value at this
        /// JSON Pointer (`/id`). A secret is generated and printed once
        /// unless `--ingest-secret-file` gives one.
        #[arg(long, value_name = "DEDUPE_POINTER")]
        webhook: Option<String>,
        /// A file holding the ingest secret (32–256 printable ASCII).
        #[arg(long, requires = "webhook")]
        ingest_secret_file: Option<PathBuf>,
        /// Fire on the platform's own events of this type (repeatable; a
        /// webhook event type or `<family>.*`, such as `memory_store.*`).
        #[arg(long = "on-event", value_name = "EVENT_TYPE")]
        on_event: Vec<String>,
        /// With `--on-event`: only events about this resource or Session.
        #[arg(long, requires = "on_event")]
        about: Option<String>,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Fire it now, with an event from a JSON file (`-`: stdin).
    Fire {
        id: String,
        #[arg(long)]
        event_file: Option<PathBuf>,
    },
    /// Stop new firings (nothing admitted is cancelled).
    Pause {
        id: String,
        #[arg(long)]
        note: Option<String>,
    },
    /// Fire again (refused with the failing checks when it is not ready).
    Resume { id: String },
    /// Delete it (its firings stay readable).
    Delete { id: String },
    /// Its firings, newest first.
    Firings { id: String },
    /// The webhook events its admission filter stopped, newest first.
    Filtered { id: String },
    /// Its history frontiers: where each stands and which firing moved it.
    Frontiers { id: String },
    /// What one firing did, drawn as a tree: the firing, then each step or
    /// child Session with its outcome.
    Trace { firing_id: String },
}

/// One receipt, in short: a child Session, an approval, a wait, a Check's
/// evaluation, a Connection step's call, an Outcome, an input into a
/// continued Session, a Memory, history or Skill step's work, or a
/// delivery screen's verdict.
fn receipt(t: &Value, step: &str) -> Vec<String> {
    let of = |kind: &str| {
        t["receipts"][kind].as_array().into_iter().flatten().filter(move |r| r["step_id"].as_str().unwrap_or_default() == step)
    };
    let mut out = vec![];
    for s in of("sessions") {
        let stop = s["stop_reason"]["type"].as_str().map(|r| format!(" ({r})")).unwrap_or_default();
        out.push(format!("session {}  {}{stop}", s["session_id"].as_str().unwrap_or_default(), s["status"].as_str().unwrap_or_default()));
    }
    for a in of("approvals") {
        out.push(format!(
            "approval {}  {}",
            a["action_approval_id"].as_str().unwrap_or_default(),
            a["status"].as_str().unwrap_or_default()
        ));
    }
    for w in of("waits") {
        let state = if w["elapsed"] == true { "elapsed" } else { "waiting" };
        out.push(format!("wait until {}  {state}", w["until"].as_str().unwrap_or_default()));
    }
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    for e in of("evaluations") {
        let said = match e["verdict"].as_str() {
            Some(v) => format!("verdict {v}"),
            None => format!("error {}", text(&e["error"])),
        };
        out.push(format!("evaluation {}  attempt {}  {said}", text(&e["id"]), e["attempt"]));
    }
    for c in of("connection_calls") {
        let status = match c["status"].as_str() {
            Some(s) => s.to_string(),
            None if c["error_code"].is_null() => "unanswered".into(),
            None => "answer unknown".into(),
        };
        let code = c["error_code"].as_str().map(|e| format!(" ({e})")).unwrap_or_default();
        out.push(format!("call {}  {}  attempt {}  {status}{code}", text(&c["id"]), text(&c["tool"]), c["attempt"]));
    }
    for o in of("outcomes") {
        out.push(format!("outcome {}  {} after {}", text(&o["outcome_id"]), text(&o["status"]), o["iterations_used"]));
    }
    for i in of("inputs") {
        out.push(format!("input {} into {}  run {}", text(&i["event_id"]), text(&i["session_id"]), text(&i["run_id"])));
    }
    for m in of("memory") {
        let came = match m["result"].as_str() {
            Some("proposed") => format!("proposed {}", text(&m["memory_proposal_id"])),
            Some("failed") => format!("failed ({})", text(&m["error"])),
            r => format!("{} at version {}", r.unwrap_or_default(), m["store_version"]),
        };
        out.push(format!(
            "memory {} {} of {}  attempt {}  {came}",
            text(&m["operation"]),
            text(&m["path"]),
            text(&m["memory_store_id"]),
            m["attempt"]
        ));
    }
    for h in of("history") {
        let through = h["through"].as_str().unwrap_or("the start");
        let came = match h["result"].as_str() {
            Some("selected") => format!("selected {} through {through}", h["session_ids"].as_array().map_or(0, Vec::len)),
            Some("moved") => format!("moved to {through}"),
            _ => format!("failed ({})", text(&h["error"])),
        };
        out.push(format!("frontier {}  {came}", text(&h["frontier"])));
    }
    for k in of("skills") {
        let came = match k["result"].as_str() {
            Some("proposed") => format!("proposed {}", text(&k["skill_proposal_id"])),
            Some("observed") => format!("observed {}", text(&k["disposition"])),
            Some("failed") => format!("failed ({})", text(&k["error"])),
            r => r.unwrap_or_default().to_string(),
        };
        out.push(format!("skill {}  {came}", text(&k["operation"])));
    }
    for v in of("screens") {
        let fate = if v["released"] == true { "released" } else { "withheld" };
        out.push(format!("screen {} in {}  {}, {fate}", text(&v["event_id"]), text(&v["session_id"]), text(&v["verdict"])));
    }
    out
}

/// The trace as a tree for a terminal: the firing; then each step with its
/// outcome and, under it, what it left (its child Session, approval or
/// wait) — or, for an Agent target, its child Session; then any missing
/// evidence.
fn trace_tree(t: &Value) -> String {
    let f = &t["firing"];
    let error = f["error"]["reason"].as_str().map(|r| format!(" ({r})")).unwrap_or_default();
    let mut out = format!(
        "{}  {}  {}{}  {}\n",
        f["id"].as_str().unwrap_or_default(),
        f["source"].as_str().unwrap_or_default(),
        f["state"].as_str().unwrap_or_default(),
        error,
        f["created_at"].as_str().unwrap_or_default()
    );
    // (line, lines under it)
    let mut rows: Vec<(String, Vec<String>)> = vec![];
    match f["program"]["steps"].as_array() {
        Some(steps) => {
            for s in steps {
                let id = s["id"].as_str().unwrap_or_default();
                let o = &s["outcome"];
                let detail = o["reason"].as_str().or(o["branch"].as_str()).map(|d| format!(" ({d})")).unwrap_or_default();
                let kind = o["kind"].as_str().unwrap_or("not reached");
                rows.push((format!("{id}  {}  {kind}{detail}", s["kind"].as_str().unwrap_or_default()), receipt(t, id)));
            }
        }
        None => rows.extend(receipt(t, "").into_iter().map(|r| (r, vec![]))),
    }
    for m in t["evidence"]["missing"].as_array().into_iter().flatten() {
        rows.push((format!("missing {} {}", m["kind"].as_str().unwrap_or_default(), m["id"].as_str().unwrap_or_default()), vec![]));
    }
    let n = rows.len();
    for (i, (line, under)) in rows.into_iter().enumerate() {
        let last = i + 1 == n;
        out.push_str(if last { "└─ " } else { "├─ " });
        out.push_str(&line);
        out.push('\n');
        let m = under.len();
        for (j, u) in under.into_iter().enumerate() {
            out.push_str(if last { "   " } else { "│  " });
            out.push_str(if j + 1 == m { "└─ " } else { "├─ " });
            out.push_str(&u);
            out.push('\n');
        }
    }
    out
}

/// `manual`, or each trigger in short: `cron */5 * * * * (UTC)`,
/// `at 2026-12-01T17:00:00.000Z`, `webhook /id`, `on memory_store.*`, with
/// the next occurrence.
fn triggers_text(a: &Value) -> String {
    let mut parts = vec![];
    for t in a["triggers"].as_array().into_iter().flatten() {
        let s = |k: &str| t[k].as_str().unwrap_or_default().to_string();
        parts.push(match t["kind"].as_str().unwrap_or_default() {
            "schedule" => format!("cron {} ({})", s("cron"), s("timezone")),
            "schedule_once" => format!("at {}", s("at")),
            "webhook" => format!("webhook {}", s("dedupe_key")),
            "subscription" => {
                let types: Vec<&str> = t["event_types"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                let about = t["resource_id"].as_str().map(|r| format!(" about {r}")).unwrap_or_default();
                format!("on {}{about}", types.join(" "))
            }
            other => other.to_string(),
        });
        if let Some(next) = t["next_at"].as_str() {
            parts.push(format!("next {next}"));
        }
    }
    if parts.is_empty() { "manual".into() } else { parts.join(", ") }
}

fn automation_line(a: &Value) -> String {
    format!(
        "{}  {:<7} {}  {}  [{}]  readiness {}  v{}",
        a["id"].as_str().unwrap_or_default(),
        a["status"].as_str().unwrap_or_default(),
        a["name"].as_str().unwrap_or_default(),
        a["target"]["agent_deployment_id"].as_str().unwrap_or_default(),
        triggers_text(a),
        a["readiness"]["state"].as_str().unwrap_or_default(),
        a["version"],
    )
}

fn filtered_line(d: &Value) -> String {
    format!(
        "{}  dedupe {}  stopped by predicate {}  {}",
        d["id"].as_str().unwrap_or_default(),
        d["dedupe_value"].as_str().unwrap_or_default(),
        d["predicate_index"],
        d["created_at"].as_str().unwrap_or_default(),
    )
}

fn firing_line(f: &Value) -> String {
    let error = f["error"]["reason"].as_str().map(|r| format!(" ({r})")).unwrap_or_default();
    let scheduled = f["scheduled_for"].as_str().map(|t| format!("  for {t}")).unwrap_or_default();
    format!(
        "{}  {:<8} {:<9}{}{scheduled}  children {}  {}",
        f["id"].as_str().unwrap_or_default(),
        f["source"].as_str().unwrap_or_default(),
        f["state"].as_str().unwrap_or_default(),
        error,
        f["child_session_ids"].as_array().map(|c| c.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(",")).unwrap_or_default(),
        f["created_at"].as_str().unwrap_or_default(),
    )
}

fn read_event(path: &PathBuf) -> anyhow::Result<Value> {
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())?
    } else {
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?
    };
    serde_json::from_str(&text).context("the event is not JSON")
}

pub async fn automation(args: ClientArgs, action: AutomationAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let printer = crate::output::Printer::of(&args);
    let print = |out: &mut dyn Write, v: &Value, line: fn(&Value) -> String| printer.line(out, v, line);
    let at = |rest: &str| format!("{}/v1/automations{rest}", c.base);
    let aid = |name: String| {
        let c = c.clone();
        async move { resolve::id(&c, AUTOMATION, &name, None).await }
    };
    match action {
        AutomationAction::List { environment, status } => {
            let environment = resolve::environment_filter(&c, environment.as_deref()).await?;
            for v in c.every(&at(""), &[("environment_id", environment), ("status", status)]).await? {
                print(out, &v, automation_line)?;
            }
            Ok(())
        }
        AutomationAction::Get { id } => print(out, &c.call(c.http.get(at(&format!("/{}", aid(id).await?)))).await?, automation_line),
        AutomationAction::Create {
            environment,
            name,
            service_principal,
            deployment,
            prompt,
            cron,
            timezone,
            at: once,
            webhook,
            ingest_secret_file,
            on_event,
            about,
            idempotency_key,
        } => {
            let environment = resolve::environment(&c, environment.as_deref()).await?;
            let service_principal = resolve::id(&c, PRINCIPAL, &service_principal, None).await?;
            let deployment = resolve::id(&c, DEPLOYMENT, &deployment, Some(&environment)).await?;
            let mut triggers = vec![];
            if let Some(cron) = cron {
                triggers.push(json!({"kind": "schedule", "cron": cron, "timezone": timezone}));
            }
            if let Some(once) = once {
                triggers.push(json!({"kind": "schedule_once", "at": once}));
            }
            if let Some(pointer) = webhook {
                triggers.push(json!({"kind": "webhook", "dedupe_key": pointer}));
            }
            if !on_event.is_empty() {
                let mut s = json!({"kind": "subscription", "event_types": on_event});
                if let Some(r) = about {
                    s["resource_id"] = json!(r);
                }
                triggers.push(s);
            }
            let mut body = json!({"environment_id": environment, "name": name, "service_principal_id": service_principal, "triggers": triggers,
                "target": {"kind": "agent", "agent_deployment_id": deployment, "prompt": prompt}});
            if let Some(path) = ingest_secret_file {
                let secret = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
                body["ingest_secret"] = json!(secret.trim());
            }
            let created = c.create("/v1/automations", &body, idempotency_key.as_deref()).await?;
            print(out, &created, automation_line)?;
            if let (false, Some(secret)) = (args.json, created["ingest_secret"].as_str()) {
                writeln!(out, "ingest secret (shown once; keep it): {secret}")?;
            }
            Ok(())
        }
        AutomationAction::Fire { id, event_file } => {
            let id = aid(id).await?;
            let body = match &event_file {
                Some(f) => json!({"event": read_event(f)?}),
                None => json!({}),
            };
            print(out, &c.call(c.http.post(at(&format!("/{id}/fire"))).json(&body)).await?, firing_line)
        }
        AutomationAction::Pause { id, note } => {
            let id = aid(id).await?;
            let body = json!({"note": note});
            print(out, &c.call(c.http.post(at(&format!("/{id}/pause"))).json(&body)).await?, automation_line)
        }
        AutomationAction::Resume { id } => {
            let id = aid(id).await?;
            print(out, &c.call(c.http.post(at(&format!("/{id}/resume"))).json(&json!({}))).await?, automation_line)
        }
        AutomationAction::Delete { id } => print(out, &c.call(c.http.delete(at(&format!("/{}", aid(id).await?)))).await?, automation_line),
        AutomationAction::Trace { firing_id } => {
            let t = c.call(c.http.get(format!("{}/v1/automation-firings/{firing_id}/trace", c.base))).await?;
            if args.json {
                writeln!(out, "{t}")?
            } else {
                write!(out, "{}", trace_tree(&t))?
            }
            Ok(())
        }
        AutomationAction::Firings { id } => {
            for v in c.every(&at(&format!("/{}/firings", aid(id).await?)), &[]).await? {
                print(out, &v, firing_line)?;
            }
            Ok(())
        }
        AutomationAction::Filtered { id } => {
            for v in c.every(&at(&format!("/{}/filtered-deliveries", aid(id).await?)), &[]).await? {
                print(out, &v, filtered_line)?;
            }
            Ok(())
        }
        AutomationAction::Frontiers { id } => {
            for v in c.every(&at(&format!("/{}/frontiers", aid(id).await?)), &[]).await? {
                print(out, &v, |f| {
                    let text = |k: &str| f[k].as_str().unwrap_or_default().to_string();
                    format!("{}  at {}  moved by {}", text("name"), text("position"), text("firing_id"))
                })?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::trace_tree;
    use serde_json::json;

    #[test]
    fn a_program_trace_draws_each_step_with_what_it_left() {
        let t = json!({
            "firing": {"id": "afire_1", "source": "webhook", "state": "succeeded", "created_at": "2026-12-02T08:00:00.000Z",
                "program": {"steps": [
                    {"id": "ok", "kind": "step_approval", "outcome": {"kind": "completed"}},
                    {"id": "a", "kind": "step_agent", "outcome": {"kind": "completed"}},
                    {"id": "d", "kind": "decision", "outcome": {"kind": "completed", "branch": "otherwise"}},
                    {"id": "c", "kind": "step_connection", "outcome": {"kind": "failed", "reason": "effect_indeterminate"}},
                    {"id": "m", "kind": "step_memory_write", "outcome": {"kind": "completed"}},
                    {"id": "p", "kind": "step_skill_proposal", "outcome": {"kind": "completed"}},
                    {"id": "b", "kind": "step_agent", "outcome": {"kind": "skipped"}}]}},
            "receipts": {"sessions": [{"step_id": "a", "session_id": "sess_1", "status": "idle", "stop_reason": {"type": "end_turn"}}],
                "approvals": [{"step_id": "ok", "action_approval_id": "apr_1", "status": "approved"}], "waits": [],
                "evaluations": [{"id": "ceval_1", "step_id": "d", "attempt": 1, "verdict": "no", "error": null}],
                "connection_calls": [{"id": "ccall_1", "step_id": "c", "attempt": 1, "tool": "add", "status": null, "error_code": "mcp.timeout"}],
                "outcomes": [{"step_id": "a", "outcome_id": "out_1", "status": "satisfied", "iterations_used": 2}],
                "inputs": [{"step_id": "a", "session_id": "sess_1", "event_id": "evt_1", "run_id": "run_1"}],
                "memory": [{"step_id": "m", "attempt": 1, "memory_store_id": "mstr_1", "path": "/n.md", "operation": "write",
                    "result": "written", "store_version": 4}],
                "skills": [{"step_id": "p", "operation": "propose", "skill_proposal_id": "skprop_1", "result": "proposed"}],
                "screens": [{"step_id": "a", "session_id": "sess_1", "event_id": "evt_2", "verdict": "blocked", "released": false}]},
            "evidence": {"complete": true, "missing": []}
        });
        assert_eq!(
            trace_tree(&t),
            "afire_1  webhook  succeeded  2026-12-02T08:00:00.000Z\n\
             ├─ ok  step_approval  completed\n\
             │  └─ approval apr_1  approved\n\
             ├─ a  step_agent  completed\n\
             │  ├─ session sess_1  idle (end_turn)\n\
             │  ├─ outcome out_1  satisfied after 2\n\
             │  ├─ input evt_1 into sess_1  run run_1\n\
             │  └─ screen evt_2 in sess_1  blocked, withheld\n\
             ├─ d  decision  completed (otherwise)\n\
             │  └─ evaluation ceval_1  attempt 1  verdict no\n\
             ├─ c  step_connection  failed (effect_indeterminate)\n\
             │  └─ call ccall_1  add  attempt 1  answer unknown (mcp.timeout)\n\
             ├─ m  step_memory_write  completed\n\
             │  └─ memory write /n.md of mstr_1  attempt 1  written at version 4\n\
             ├─ p  step_skill_proposal  completed\n\
             │  └─ skill propose  proposed skprop_1\n\
             └─ b  step_agent  skipped\n"
        );
    }
}
