//! GitHub repository webhooks: registered with `POST
//! /repos/{owner}/{name}/hooks` (`config {url, content_type:"json",
//! secret}`), checked with `GET …/hooks/{id}`, removed with `DELETE`;
//! deliveries signed in `X-Hub-Signature-256` (`sha256=` and the hex
//! HMAC-SHA256 of the body), identified by `X-GitHub-Delivery`, typed by
//! `X-GitHub-Event` (`ping` when a hook is made). No polling.

use super::{Api, Delivery, Failure, Headers, Provider, header, resource_name};
use serde_json::{Value, json};

pub struct GitHub;

const EVENTS: &[&str] = &[
    "check_run",
    "check_suite",
    "create",
    "delete",
    "deployment",
    "deployment_status",
    "discussion",
    "discussion_comment",
    "fork",
    "issue_comment",
    "issues",
    "label",
    "member",
    "milestone",
    "public",
    "pull_request",
    "pull_request_review",
    "pull_request_review_comment",
    "push",
    "release",
    "repository",
    "star",
    "status",
    "watch",
    "workflow_dispatch",
    "workflow_job",
    "workflow_run",
];

/// `/repos/{owner}/{name}` of a checked resource.
fn repo(resource: &Value) -> String {
    format!("/repos/{}/{}", resource["owner"].as_str().unwrap_or_default(), resource["name"].as_str().unwrap_or_default())
}

/// A hook id as a path segment: digits only.
fn hook_path(resource: &Value, hook_id: &str) -> Result<String, Failure> {
    if hook_id.is_empty() || !hook_id.chars().all(|c| c.is_ascii_digit()) {
        return Err(Failure::new("hook_missing", "the registration names no GitHub hook"));
    }
    Ok(format!("{}/hooks/{hook_id}", repo(resource)))
}

#[async_trait::async_trait]
impl Provider for GitHub {
    fn name(&self) -> &'static str {
        "github"
    }
    fn modes(&self) -> &'static [&'static str] {
        &["automatic", "manual"]
    }
    fn events(&self) -> &'static [&'static str] {
        EVENTS
    }
    fn resource_kinds(&self) -> &'static [&'static str] {
        &["repository"]
    }

    fn check_resource(&self, r: &Value) -> Result<(), String> {
        let o = r.as_object().ok_or("a github resource is {kind:\"repository\", owner, name}")?;
        if let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "kind" | "owner" | "name")) {
            return Err(format!("a github resource has no field {k:?}"));
        }
        if o.get("kind").and_then(Value::as_str) != Some("repository") {
            return Err("a github resource's kind is repository".into());
        }
        for part in ["owner", "name"] {
            if !o.get(part).and_then(Value::as_str).is_some_and(resource_name) {
                return Err(format!("a repository's {part} is 1 to 100 letters, digits, -, _ or ."));
            }
        }
        Ok(())
    }

    async fn register(&self, api: &Api, r: &Value, events: &[String], callback: &str, secret: &str) -> Result<String, Failure> {
        let body = json!({"name": "web", "active": true, "events": events,
            "config": {"url": callback, "content_type": "json", "secret": secret, "insecure_ssl": "0"}});
        let (status, answer) = api.call("POST", &format!("{}/hooks", repo(r)), Some(body)).await?;
        if !(200..300).contains(&status) {
            return Err(Failure::of_status(status, false));
        }
        match &answer["id"] {
            Value::Number(n) => Ok(n.to_string()),
            Value::String(s) if !s.is_empty() => Ok(s.clone()),
            _ => Err(Failure::new("provider_error", "GitHub's answer named no hook id")),
        }
    }

    async fn hook_exists(&self, api: &Api, r: &Value, hook_id: &str) -> Result<bool, Failure> {
        let (status, _) = api.call("GET", &hook_path(r, hook_id)?, None).await?;
        match status {
            200..=299 => Ok(true),
            404 => Ok(false),
            s => Err(Failure::of_status(s, true)),
        }
    }

    async fn unregister(&self, api: &Api, r: &Value, hook_id: &str) -> Result<(), Failure> {
        let Ok(path) = hook_path(r, hook_id) else { return Ok(()) };
        let (status, _) = api.call("DELETE", &path, None).await?;
        match status {
            200..=299 | 404 => Ok(()),
            s => Err(Failure::of_status(s, true)),
        }
    }

    fn verify(&self, headers: &Headers, body: &[u8], secret: &str) -> bool {
        header(headers, "x-hub-signature-256")
            .and_then(|v| v.strip_prefix("sha256="))
            .is_some_and(|sig| checkfu_core::signature::verify_body_mac(secret, body, sig))
    }

    fn delivery(&self, headers: &Headers, body: &Value) -> Result<Delivery, String> {
        let id = header(headers, "x-github-delivery").ok_or("X-GitHub-Delivery is missing")?;
        let event = header(headers, "x-github-event").ok_or("X-GitHub-Event is missing")?;
        if id.len() > 200 || event.len() > 100 {
            return Err("X-GitHub-Delivery or X-GitHub-Event is too long".into());
        }
        Ok(Delivery {
            id: id.to_string(),
            event_type: event.to_string(),
            action: body.get("action").and_then(Value::as_str).map(str::to_string),
            ping: event == "ping",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> Headers {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_repository_is_checked_and_deliveries_read() {
        let g = GitHub;
        assert!(g.check_resource(&json!({"kind": "repository", "owner": "o", "name": "r"})).is_ok());
        for bad in [
            json!({"kind": "org", "owner": "o", "name": "r"}),
            json!({"kind": "repository", "owner": "o/x", "name": "r"}),
            json!({"kind": "repository", "owner": "o", "name": "r", "x": 1}),
            json!("o/r"),
        ] {
            assert!(g.check_resource(&bad).is_err(), "{bad}");
        }
        let body = br#"{"action":"opened"}"#;
        let sig = format!("sha256={}", checkfu_core::signature::body_mac_hex("s3", body));
        assert!(g.verify(&headers(&[("x-hub-signature-256", &sig)]), body, "s3"));
        assert!(!g.verify(&headers(&[("x-hub-signature-256", &sig)]), body, "other"));
        assert!(!g.verify(&headers(&[]), body, "s3"));
        let h = headers(&[("x-github-delivery", "d1"), ("x-github-event", "issues")]);
        let d = g.delivery(&h, &json!({"action": "opened"})).expect("read");
        assert_eq!(d, Delivery { id: "d1".into(), event_type: "issues".into(), action: Some("opened".into()), ping: false });
        assert!(g.delivery(&headers(&[("x-github-event", "issues")]), &json!({})).is_err());
        assert!(hook_path(&json!({"owner": "o", "name": "r"}), "../x").is_err(), "a hook id is digits");
    }
}
