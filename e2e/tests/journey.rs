//! The quick-start journey through the public API, embedded.
#![cfg(test)]

use checkfu_e2e::sse::Stream;
use checkfu_e2e::*;
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn quick_start_journey_with_a_service_principal() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let admin = &p.admin;
    let d = deploy(admin, &p.env_id, json!({"instructions": "Be brief.", "tools": [{"type": "builtin", "name": "read"}]})).await;

    // A service principal with its own key, granted invoke on the agent.
    let bot = admin.post("/v1/principals", json!({"kind": "service", "name": "ci-bot"})).await;
    expect(&bot, 201, None);
    let bot_id = id(&bot.1);
    let key = admin.post(&format!("/v1/principals/{bot_id}/api-keys"), json!({"name": "ci"})).await;
    expect(&key, 201, None);
    let secret = key.1["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("ck_"));
    let listed = admin.get(&format!("/v1/principals/{bot_id}/api-keys")).await;
    assert!(!listed.1.to_string().contains(&secret), "the secret is shown once, never listed");
    let bot_api = Api::new(&p.base, &secret);

    // Without invoke the bot cannot start a session.
    let denied = bot_api.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "principal_id": bot_id})).await;
    expect(&denied, 403, Some("permission.denied"));

    let grant = admin.post("/v1/permission-assignments", json!({"subject": {"kind": "principal", "id": bot_id}, "permission": "invoke", "resource": {"kind": "agent", "id": d.agent_id}})).await;
    expect(&grant, 201, None);

    let s = bot_api
        .post(
            "/v1/sessions",
            json!({"agent_deployment_id": d.deployment_id, "principal_id": bot_id, "title": "first", "metadata": {"ticket": "T-1"}}),
        )
        .await;
    expect(&s, 201, None);
    assert_eq!(s.1["status"], "idle");
    assert_eq!(s.1["metadata"]["ticket"], "T-1");
    let sid = id(&s.1);

    // Follow the stream from the start while the turn runs.
    let mut stream = Stream::open(&p.base, &secret, &format!("/v1/sessions/{sid}/events/stream?event_deltas=agent.message"), None).await;
    assert!(stream.content_type.starts_with("text/event-stream"));
    let sent = bot_api.post(&format!("/v1/sessions/{sid}/events"), message(&bot_id, "hello there")).await;
    expect(&sent, 201, None);
    assert_eq!(sent.1["type"], "user.message");
    assert_eq!(sent.1["authored_by"], bot_id.as_str());
    let frames = stream.until(Duration::from_secs(10), |f| f.event == "session.status_idle").await;

    // Persisted frames carry ids equal to their seq, in order; previews carry none.
    let persisted: Vec<_> = frames.iter().filter(|f| f.id.is_some()).collect();
    for (i, f) in persisted.iter().enumerate() {
        assert_eq!(f.id.as_deref().unwrap().parse::<i64>().unwrap(), i as i64 + 1);
        assert_eq!(f.json()["type"], f.event.as_str());
    }
    let kinds: Vec<&str> = persisted.iter().map(|f| f.event.as_str()).collect();
    assert_eq!(
        kinds,
        vec![
            "session.created",
            "user.message",
            "run.created",
            "session.status_running",
            "span.model_request_start",
            "agent.message",
            "span.model_request_end",
            "run.completed",
            "session.status_idle"
        ]
    );
    let previews: Vec<_> = frames.iter().filter(|f| f.event == "event_start" || f.event == "event_delta").collect();
    assert!(previews.iter().all(|f| f.id.is_none()), "previews never carry an id");
    assert_eq!(previews.first().map(|f| f.event.as_str()), Some("event_start"));
    let preview_text: String =
        previews.iter().filter(|f| f.event == "event_delta").map(|f| f.json()["delta"]["text"].as_str().unwrap().to_string()).collect();
    let final_text = persisted.iter().find(|f| f.event == "agent.message").unwrap().json()["payload"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(final_text, "echo: hello there");
    assert!(final_text.starts_with(&preview_text) && !preview_text.is_empty(), "deltas concatenate to a prefix of the final text");
    assert!(previews.iter().filter(|f| f.event == "event_delta").all(|f| f.json()["delta"]["text"].as_str().unwrap().chars().count() <= 8));

    // Run pins and usage.
    let run_created = persisted.iter().find(|f| f.event == "run.created").unwrap().json();
    let pins = &run_created["payload"]["execution_pins"];
    assert_eq!(pins["agent_id"], d.agent_id.as_str());
    assert_eq!(pins["model_routing_profile_id"], d.routing_profile_id.as_str());
    assert_eq!(pins["instructions_sha256"].as_str().unwrap().len(), 64);
    let session = bot_api.get(&format!("/v1/sessions/{sid}")).await.1;
    assert_eq!(session["status"], "idle");
    assert_eq!(session["stop_reason"]["type"], "end_turn");
    let end = persisted.iter().find(|f| f.event == "span.model_request_end").unwrap().json();
    let (i, o) =
        (end["payload"]["model_usage"]["input_tokens"].as_i64().unwrap(), end["payload"]["model_usage"]["output_tokens"].as_i64().unwrap());
    assert_eq!(o, ("echo: hello there".len() as i64 + 3) / 4);
    assert_eq!(end["payload"]["cost_micro_usd"].as_i64().unwrap(), i + 5 * o);
    assert_eq!(session["usage"]["input_tokens"].as_i64().unwrap(), i);
    assert_eq!(session["usage"]["model_spend_micro_usd"].as_i64().unwrap(), i + 5 * o);
    let runs = bot_api.get(&format!("/v1/sessions/{sid}/runs")).await;
    expect(&runs, 200, None);
    let run = &runs.1["data"][0];
    assert_eq!(run["status"], "completed");
    assert_eq!(bot_api.get(&format!("/v1/runs/{}", id(run))).await.1["id"], run["id"]);

    // Resume from a Last-Event-ID: exactly the events after it, then live.
    let mut resumed = Stream::open(&p.base, &secret, &format!("/v1/sessions/{sid}/events/stream"), Some(6)).await;
    let replay = resumed.until(Duration::from_secs(5), |f| f.id.as_deref() == Some("9")).await;
    assert_eq!(replay.iter().filter_map(|f| f.id.clone()).collect::<Vec<_>>(), vec!["7", "8", "9"]);
    bot_api.post(&format!("/v1/sessions/{sid}/events"), message(&bot_id, "again")).await;
    let live = resumed.until(Duration::from_secs(10), |f| f.event == "session.status_idle").await;
    let ids: Vec<i64> = live.iter().filter_map(|f| f.id.as_ref()).map(|i| i.parse().unwrap()).collect();
    assert_eq!(ids, (10..10 + ids.len() as i64).collect::<Vec<_>>(), "live tail continues with no gap or duplicate");
    let again = resumed.next(Duration::from_millis(500)).await;
    assert!(again.as_ref().is_none_or(|f| f.id.is_none()), "nothing replayed twice: {again:?}");

    // ?after_seq works like Last-Event-ID.
    let mut by_query = Stream::open(&p.base, &secret, &format!("/v1/sessions/{sid}/events/stream?after_seq=16"), None).await;
    let f = by_query.next(Duration::from_secs(5)).await.unwrap();
    assert_eq!(f.id.as_deref(), Some("17"));

    let all = events(&bot_api, &sid).await;
    assert_gapless(&all);
    let texts: Vec<String> = all
        .iter()
        .filter(|e| e["type"] == "agent.message")
        .map(|e| e["payload"]["content"][0]["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(texts, vec!["echo: hello there", "echo: again"]);

    // Paging and type filters on the events list.
    let page = bot_api.get(&format!("/v1/sessions/{sid}/events?limit=5")).await;
    assert_eq!(page.1["data"].as_array().unwrap().len(), 5);
    let next = page.1["next_page"].as_str().unwrap().to_string();
    let page2 = bot_api.get(&format!("/v1/sessions/{sid}/events?limit=5&page={next}")).await;
    assert_eq!(page2.1["data"][0]["seq"], 6);
    let only = bot_api.get(&format!("/v1/sessions/{sid}/events?types[]=agent.message&types[]=user.message")).await;
    assert_eq!(types(only.1["data"].as_array().unwrap()), vec!["user.message", "agent.message", "user.message", "agent.message"]);

    // Revocation takes effect at the next check.
    let grant_id = id(&grant.1);
    expect(&admin.delete(&format!("/v1/permission-assignments/{grant_id}")).await, 200, None);
    let after_revoke = bot_api.post(&format!("/v1/sessions/{sid}/events"), message(&bot_id, "still there?")).await;
    expect(&after_revoke, 403, Some("permission.denied"));

    // Revoking the key locks the bot out at once.
    expect(&admin.delete(&format!("/v1/api-keys/{}", id(&key.1))).await, 200, None);
    expect(&bot_api.get(&format!("/v1/sessions/{sid}")).await, 401, Some("auth.invalid_key"));

    // Archive terminates; further events conflict.
    let archived = admin.post(&format!("/v1/sessions/{sid}/archive"), json!({})).await;
    expect(&archived, 200, None);
    assert_eq!(archived.1["status"], "terminated");
    let ended = events(admin, &sid).await.into_iter().rev().find(|e| e["type"] == "session.status_terminated").unwrap();
    assert_eq!(ended["caused_by"], json!({"kind": "principal", "id": p.admin_id}), "the archive is attributed to its caller");
    let interrupt = interrupt(&p.admin_id);
    expect(&admin.post(&format!("/v1/sessions/{sid}/events"), interrupt).await, 409, Some("validation.conflict"));
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn act_as_admin_reach_is_never_lent() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let admin = &p.admin;
    let d = deploy(admin, &p.env_id, json!({})).await;
    let bot = id(&admin.post("/v1/principals", json!({"kind": "service", "name": "worker"})).await.1);

    // The admin may act as anyone, but the session's principal needs its own invoke.
    let s = admin.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "principal_id": bot})).await;
    expect(&s, 403, Some("permission.denied"));
    admin.post("/v1/permission-assignments", json!({"subject": {"kind": "principal", "id": bot}, "permission": "invoke", "resource": {"kind": "environment", "id": p.env_id}})).await;
    let s = admin.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "principal_id": bot})).await;
    expect(&s, 201, None);
    assert_eq!(s.1["principal_id"], bot.as_str());

    // A non-admin needs act_as to create a session acting as someone else.
    let alice = id(&admin.post("/v1/principals", json!({"kind": "human", "name": "alice"})).await.1);
    let alice_key =
        admin.post(&format!("/v1/principals/{alice}/api-keys"), json!({"name": "k"})).await.1["secret"].as_str().unwrap().to_string();
    let alice_api = Api::new(&p.base, &alice_key);
    expect(
        &alice_api.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "principal_id": bot})).await,
        403,
        Some("permission.denied"),
    );
    // Through a group.
    let g = id(&admin.post("/v1/groups", json!({"name": "operators"})).await.1);
    expect(&admin.post(&format!("/v1/groups/{g}/members"), json!({"principal_id": alice})).await, 201, None);
    admin
        .post(
            "/v1/permission-assignments",
            json!({"subject": {"kind": "group", "id": g}, "permission": "act_as", "resource": {"kind": "principal", "id": bot}}),
        )
        .await;
    let s2 = alice_api.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "principal_id": bot})).await;
    expect(&s2, 201, None);
    // Authorship: alice may author as the bot (act_as) but not as the admin.
    let sid = id(&s2.1);
    expect(&alice_api.post(&format!("/v1/sessions/{sid}/events"), message(&p.admin_id, "spoof")).await, 403, Some("permission.denied"));
    expect(&alice_api.post(&format!("/v1/sessions/{sid}/events"), message(&bot, "as the bot")).await, 201, None);
    // Leaving the group removes the reach at the next check.
    expect(&admin.delete(&format!("/v1/groups/{g}/members/{alice}")).await, 200, None);
    expect(&alice_api.get(&format!("/v1/sessions/{sid}")).await, 403, Some("permission.denied"));

    // Only an installation admin grants manage; a manager grants invoke in its environment.
    admin.post("/v1/permission-assignments", json!({"subject": {"kind": "principal", "id": alice}, "permission": "manage", "resource": {"kind": "environment", "id": p.env_id}})).await;
    let by_manager = alice_api.post("/v1/permission-assignments", json!({"subject": {"kind": "principal", "id": bot}, "permission": "manage", "resource": {"kind": "environment", "id": p.env_id}})).await;
    expect(&by_manager, 403, Some("permission.denied"));
    let invoke = alice_api
        .post(
            "/v1/permission-assignments",
            json!({"subject": {"kind": "principal", "id": bot}, "permission": "invoke", "resource": {"kind": "agent", "id": d.agent_id}}),
        )
        .await;
    expect(&invoke, 201, None);
    let mine = alice_api.get(&format!("/v1/permission-assignments?subject_id={alice}")).await;
    expect(&mine, 200, None);
    assert_eq!(mine.1["data"].as_array().unwrap().len(), 1);
    p.stop().await;
}
