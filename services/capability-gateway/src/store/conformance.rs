//! The conformance suite for [`ReachStore`]: one body of assertions run
//! against every backend. SQLite always; PostgreSQL when
//! `CHECKFU_TEST_POSTGRES_URL` is set (each run gets a fresh schema).

use super::*;
use checkfu_core::testing::tid;
use checkfu_store::{Db, Location};
use std::sync::Arc;

async fn backends() -> Vec<(String, Arc<dyn ReachStore>, Option<tempfile::TempDir>)> {
    let mut out: Vec<(String, Arc<dyn ReachStore>, Option<tempfile::TempDir>)> = Vec::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(&Location::SqliteDir(dir.path().into()), "capability_gateway", &crate::MIGRATIONS).await.expect("sqlite");
    out.push(("sqlite".into(), Arc::new(SqlReachStore::new(db)), Some(dir)));
    if let Some(url) = checkfu_core::testing::postgres("the capability gateway store on PostgreSQL") {
        let schema = checkfu_core::testing::fresh_schema("capgw");
        let db = Db::open(&Location::Postgres(url), &schema, &crate::MIGRATIONS).await.expect("postgres");
        out.push(("postgres".into(), Arc::new(SqlReachStore::new(db)), None));
    }
    out
}

fn conn(id: &str, env: &str, name: &str) -> Connection {
    Connection {
        id: tid(id),
        environment_id: tid(env),
        name: name.into(),
        description: String::new(),
        metadata: serde_json::json!({"team": "a"}),
        kind: ConnectionKind::Mcp,
        url: "https://mcp.example.com/mcp".into(),
        owner: Owner::Environment,
        status: ConnectionStatus::Active,
        credential: Some(StoredCredential {
            meta: CredentialMeta {
                kind: "static_bearer".into(),
                header: None,
                token_endpoint: None,
                client_id: None,
                scope: None,
                token_endpoint_auth: None,
            },
            envelope: Envelope { key_id: "k1".into(), wrapped_key: "aa".into(), sealed: "bb".into() },
            state: CredentialState::Ok,
            created_ms: 5,
            rotated_ms: None,
            last_used_ms: None,
        }),
        created_by: "prin_a".into(),
        created_ms: 5,
        updated_ms: 5,
        revoked_ms: None,
        version: 1,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_round_trip_with_unique_live_names_and_versions() {
    for (name, s, _guard) in backends().await {
        let a = conn("conn_01a", "env_1", "github");
        s.insert_connection(&a, &[]).await.expect("insert");
        assert_eq!(s.get_connection(&a.id).await.expect("get").as_ref(), Some(&a), "{name}");
        let dup = conn("conn_01b", "env_1", "github");
        let e = s.insert_connection(&dup, &[]).await.expect_err("name taken");
        assert_eq!(e.details["reason"], "name_taken", "{name}");
        s.insert_connection(&conn("conn_01c", "env_2", "github"), &[]).await.expect("another environment");

        // A revoked Connection frees its name.
        let mut revoked = a.clone();
        revoked.status = ConnectionStatus::Revoked;
        revoked.credential = None;
        revoked.revoked_ms = Some(9);
        revoked.version = 2;
        assert!(s.update_connection(&revoked, 1, &[]).await.expect("revoke"), "{name}");
        assert!(!s.update_connection(&revoked, 1, &[]).await.expect("stale"), "{name}: compare-and-set on version");
        assert_eq!(s.get_connection(&a.id).await.expect("get").as_ref(), Some(&revoked), "{name}");
        s.insert_connection(&dup, &[]).await.expect("the name is free again");

        let page = PageRequest::standard(10, "").expect("page");
        let envs = vec!["env_1".to_string(), "env_2".to_string()];
        let all = s.list_connections(&envs, None, None, &page).await.expect("list");
        assert_eq!(all.iter().map(|c| c.id.to_string()).collect::<Vec<_>>(), ["conn_01c", "conn_01b", "conn_01a"], "{name}");
        let live = s.list_connections(&envs, Some(ConnectionKind::Mcp), Some(ConnectionStatus::Active), &page).await.expect("list");
        assert_eq!(live.len(), 2, "{name}");
        assert!(s.list_connections(&envs, Some(ConnectionKind::Http), None, &page).await.expect("list").is_empty(), "{name}");

        // Credentials are walked in id order; revoked ones hold none.
        let held = s.with_credentials_after("", 10).await.expect("walk");
        assert_eq!(held.iter().map(|c| c.id.to_string()).collect::<Vec<_>>(), ["conn_01b", "conn_01c"], "{name}");
        assert_eq!(s.with_credentials_after("conn_01b", 10).await.expect("walk").len(), 1, "{name}");

        // A use is noted at most once a minute.
        s.touch_credential(&dup.id, 100_000).await.expect("touch");
        s.touch_credential(&dup.id, 130_000).await.expect("touch");
        let used = s.get_connection(&dup.id).await.expect("get").and_then(|c| c.credential).and_then(|k| k.last_used_ms);
        assert_eq!(used, Some(100_000), "{name}");
        s.touch_credential(&dup.id, 170_001).await.expect("touch");
        let used = s.get_connection(&dup.id).await.expect("get").and_then(|c| c.credential).and_then(|k| k.last_used_ms);
        assert_eq!(used, Some(170_001), "{name}");
    }
}
