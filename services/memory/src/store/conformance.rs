//! The conformance suite for [`MemoryDb`]: SQLite always, PostgreSQL when
//! `CHECKFU_TEST_POSTGRES_URL` is set (a fresh schema per run).

use super::*;
use checkfu_core::testing::tid;
use checkfu_store::{Db, Location};
use serde_json::json;
use std::sync::Arc;

async fn backends() -> Vec<(&'static str, Arc<dyn MemoryDb>, Option<tempfile::TempDir>)> {
    let mut out: Vec<(&'static str, Arc<dyn MemoryDb>, Option<tempfile::TempDir>)> = vec![];
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(&Location::SqliteDir(dir.path().into()), "memory", &crate::MIGRATIONS).await.expect("sqlite");
    out.push(("sqlite", Arc::new(SqlMemoryDb::new(db)), Some(dir)));
    if let Some(url) = checkfu_core::testing::postgres("the memory store on PostgreSQL") {
        let schema = checkfu_core::testing::fresh_schema("memory");
        let db = Db::open(&Location::Postgres(url), &schema, &crate::MIGRATIONS).await.expect("postgres");
        out.push(("postgres", Arc::new(SqlMemoryDb::new(db)), None));
    }
    out
}

fn store(id: &str) -> Store {
    Store {
        id: tid(id),
        environment_id: tid("env_1"),
        name: "notes".into(),
        description: String::new(),
        metadata: json!({}),
        owner: Owner { kind: "principal".into(), id: "prin_1".into() },
        review: Review::Direct,
        head_version: 0,
        status: StoreStatus::Active,
        created_from: None,
        created_by: "prin_1".into(),
        created_ms: 1,
        updated_ms: 1,
        archived_ms: 0,
        version: 1,
    }
}

fn content(text: &str) -> Content {
    Content { sha256: checkfu_core::sha256_hex(text), size_bytes: text.len() as i64, inline: Some(text.into()) }
}

fn write(store_id: &str, path: &str, text: Option<&str>, expected: Expect) -> Commit {
    Commit {
        store_id: tid(store_id),
        changes: vec![Staged { path: path.into(), content: text.map(content), expected }],
        actor: Actor::principal("prin_1"),
        via: Via::Api,
        approves: None,
        allow_archived: false,
        key: String::new(),
        now_ms: 10,
    }
}

fn sha(text: &str) -> String {
    checkfu_core::sha256_hex(text)
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_store_conformance() {
    for (name, db, _dir) in backends().await {
        eprintln!("memory store conformance: {name}");
        stores_compare_and_set(db.as_ref()).await;
        commits_follow_the_expectation_table(db.as_ref()).await;
        versions_stay_readable(db.as_ref()).await;
        listing_pages_by_path_and_prefix(db.as_ref()).await;
        proposals_apply_once(db.as_ref()).await;
        two_concurrent_writers_one_wins(db.clone()).await;
        deleting_a_store_removes_what_it_holds(db.as_ref()).await;
        dreams_are_claimed_once_and_complete_all_or_nothing(db.as_ref()).await;
        a_keyed_write_or_proposal_is_made_once(db.as_ref()).await;
    }
}

/// An Automation's write is sent again after a crash with its key: the
/// second send answers the first's version — even once the document moved
/// on — or the first's proposal, and writes nothing.
async fn a_keyed_write_or_proposal_is_made_once(db: &dyn MemoryDb) {
    db.insert_store(&store("mstr_k"), &[]).await.expect("insert");
    let keyed = Commit { key: "fir_1/w".into(), via: Via::Automation, ..write("mstr_k", "/n.md", Some("one"), Expect::Absent) };
    let Committed::Version(v1) = db.commit(&keyed).await.expect("first") else { panic!("written") };
    assert_eq!(db.commit(&keyed).await.expect("again"), Committed::Replayed(v1.clone()), "the same version, not a mismatch");
    assert!(matches!(
        db.commit(&write("mstr_k", "/n.md", Some("two"), Expect::Sha(sha("one")))).await.expect("api"),
        Committed::Version(_)
    ));
    assert_eq!(db.commit(&keyed).await.expect("later"), Committed::Replayed(v1.clone()), "answered after the document moved on");
    assert_eq!(db.version("mstr_k", 1).await.expect("v1").map(|v| v.via), Some(Via::Automation));
    let other = Commit { key: "fir_1/w2".into(), ..write("mstr_k", "/n.md", Some("three"), Expect::Sha(sha("one"))) };
    assert!(matches!(db.commit(&other).await.expect("other key"), Committed::Mismatch { .. }), "another key is a new write");

    db.insert_store(&Store { review: Review::Proposal, ..store("mstr_kp") }, &[]).await.expect("insert");
    let proposal = |id: &str| Proposal {
        id: tid(id),
        store_id: tid("mstr_kp"),
        status: ProposalStatus::Open,
        base_version: 0,
        changes: vec![Staged { path: "/n.md".into(), content: Some(content("p")), expected: Expect::Absent }],
        reason: ProposalReason::Requested,
        source: Actor { kind: "automation_firing".into(), id: "fir_1".into() },
        rationale: String::new(),
        created_ms: 1,
        decided_by: String::new(),
        decided_ms: 0,
        decision_note: String::new(),
        applied_version: 0,
    };
    assert_eq!(db.propose_once(&proposal("mprop_k1"), "fir_1/w").await.expect("first").id, "mprop_k1");
    assert_eq!(db.propose_once(&proposal("mprop_k2"), "fir_1/w").await.expect("again").id, "mprop_k1", "the first proposal");
    assert_eq!(db.get_proposal("mprop_k2").await.expect("get"), None, "no second proposal");
    assert_eq!(db.propose_once(&proposal("mprop_k3"), "fir_2/w").await.expect("other").id, "mprop_k3");
}

async fn stores_compare_and_set(db: &dyn MemoryDb) {
    let s = store("mstr_a");
    db.insert_store(&s, &[]).await.expect("insert");
    assert_eq!(db.get_store("mstr_a").await.expect("get"), Some(s.clone()));
    let renamed = Store { name: "renamed".into(), version: 2, ..s.clone() };
    assert!(db.update_store(&renamed, 1, &[]).await.expect("update"));
    assert!(!db.update_store(&Store { version: 3, ..renamed.clone() }, 1, &[]).await.expect("stale"), "a stale writer loses");
    assert_eq!(db.get_store("mstr_a").await.expect("get").map(|s| s.name), Some("renamed".into()));
    let archived = Store { status: StoreStatus::Archived, archived_ms: 5, version: 3, ..renamed };
    assert!(db.update_store(&archived, 2, &[]).await.expect("archive"));
    let page = PageRequest { limit: 10, before_id: None };
    let f = StoreFilter { environment_id: Some("env_1".into()), ..Default::default() };
    assert!(db.list_stores(&f, &page).await.expect("list").iter().all(|s| s.id != "mstr_a"), "archived stores are hidden");
    let all = StoreFilter { include_archived: true, ..f };
    assert!(db.list_stores(&all, &page).await.expect("list").iter().any(|s| s.id == "mstr_a"));
    assert_eq!(db.commit(&write("mstr_a", "/x", Some("x"), Expect::Absent)).await.expect("commit"), Committed::Archived);
}

async fn commits_follow_the_expectation_table(db: &dyn MemoryDb) {
    db.insert_store(&store("mstr_b"), &[]).await.expect("insert");
    let Committed::Version(v1) = db.commit(&write("mstr_b", "/a.md", Some("one"), Expect::Absent)).await.expect("create") else {
        panic!("created")
    };
    assert_eq!(v1.store_version, 1);
    assert_eq!(v1.changes[0].operation, "created");
    assert_eq!(v1.changes[0].sha256_after, Some(sha("one")));
    // Create-only on a present path, a stale sha, a sha on a missing path.
    let mismatch = db.commit(&write("mstr_b", "/a.md", Some("two"), Expect::Absent)).await.expect("commit");
    assert_eq!(mismatch, Committed::Mismatch { path: "/a.md".into(), current: Some(sha("one")), head_version: 1 });
    let stale = db.commit(&write("mstr_b", "/a.md", Some("two"), Expect::Sha(sha("zero")))).await.expect("commit");
    assert!(matches!(stale, Committed::Mismatch { .. }), "{stale:?}");
    let missing = db.commit(&write("mstr_b", "/nope.md", Some("two"), Expect::Sha(sha("one")))).await.expect("commit");
    assert_eq!(missing, Committed::Mismatch { path: "/nope.md".into(), current: None, head_version: 1 }, "a sha never creates");
    // The current sha writes; the same content again commits nothing.
    let Committed::Version(v2) = db.commit(&write("mstr_b", "/a.md", Some("two"), Expect::Sha(sha("one")))).await.expect("write") else {
        panic!("written")
    };
    assert_eq!((v2.store_version, v2.changes[0].operation.as_str()), (2, "modified"));
    assert_eq!(db.commit(&write("mstr_b", "/a.md", Some("two"), Expect::Sha(sha("two")))).await.expect("same"), Committed::Unchanged(2));
    assert_eq!(db.get_store("mstr_b").await.expect("get").map(|s| s.head_version), Some(2));
    assert_eq!(db.content(&sha("two")).await.expect("content"), Some(Some("two".into())));
}

async fn versions_stay_readable(db: &dyn MemoryDb) {
    let Committed::Version(v3) = db.commit(&write("mstr_b", "/a.md", None, Expect::Sha(sha("two")))).await.expect("delete") else {
        panic!("deleted")
    };
    assert_eq!(v3.changes[0].operation, "deleted");
    assert_eq!(db.document("mstr_b", "/a.md", None).await.expect("head"), None);
    assert_eq!(db.document("mstr_b", "/a.md", Some(3)).await.expect("v3"), None, "deleted at 3");
    assert_eq!(db.document("mstr_b", "/a.md", Some(1)).await.expect("v1").map(|d| d.sha256), Some(sha("one")));
    assert_eq!(db.document("mstr_b", "/a.md", Some(2)).await.expect("v2").map(|d| d.updated_in_version), Some(2));
    let listed: Vec<i64> = db.versions("mstr_b", None, 10).await.expect("versions").iter().map(|v| v.store_version).collect();
    assert_eq!(listed, [3, 2, 1]);
    assert_eq!(db.versions("mstr_b", Some(3), 1).await.expect("page").len(), 1);
    assert_eq!(db.version("mstr_b", 2).await.expect("v").map(|v| v.changes[0].sha256_before.clone()), Some(Some(sha("one"))));
}

async fn listing_pages_by_path_and_prefix(db: &dyn MemoryDb) {
    db.insert_store(&store("mstr_c"), &[]).await.expect("insert");
    for p in ["/b/2.md", "/a.md", "/b/1.md", "/b-c.md", "/c.md"] {
        assert!(matches!(db.commit(&write("mstr_c", p, Some(p), Expect::Absent)).await.expect("w"), Committed::Version(_)));
    }
    let paths = |v: Vec<DocumentMeta>| v.into_iter().map(|d| d.path).collect::<Vec<_>>();
    assert_eq!(paths(db.documents("mstr_c", "", None, "", 10).await.expect("all")), ["/a.md", "/b-c.md", "/b/1.md", "/b/2.md", "/c.md"]);
    assert_eq!(paths(db.documents("mstr_c", "/b/", None, "", 10).await.expect("prefix")), ["/b/1.md", "/b/2.md"]);
    assert_eq!(paths(db.documents("mstr_c", "", None, "/b-c.md", 2).await.expect("page")), ["/b/1.md", "/b/2.md"]);
    assert_eq!(paths(db.documents("mstr_c", "", Some(2), "", 10).await.expect("at 2")), ["/a.md", "/b/2.md"]);
}

async fn proposals_apply_once(db: &dyn MemoryDb) {
    db.insert_store(&Store { review: Review::Proposal, ..store("mstr_d") }, &[]).await.expect("insert");
    let p = Proposal {
        id: tid("mprop_1"),
        store_id: tid("mstr_d"),
        status: ProposalStatus::Open,
        base_version: 0,
        changes: vec![
            Staged { path: "/x.md".into(), content: Some(content("x")), expected: Expect::Absent },
            Staged { path: "/y.md".into(), content: Some(content("y")), expected: Expect::Absent },
        ],
        reason: ProposalReason::Requested,
        source: Actor::principal("prin_1"),
        rationale: "why".into(),
        created_ms: 1,
        decided_by: String::new(),
        decided_ms: 0,
        decision_note: String::new(),
        applied_version: 0,
    };
    db.insert_proposal(&p).await.expect("propose");
    let got = db.get_proposal("mprop_1").await.expect("get").expect("some");
    assert_eq!(got.changes.len(), 2);
    assert_eq!(got.changes[0].content.as_ref().map(|c| c.sha256.clone()), Some(sha("x")));
    let approve = |by: &str| Commit {
        store_id: tid("mstr_d"),
        changes: got.changes.clone(),
        actor: Actor::principal(by),
        via: Via::Proposal,
        approves: Some(Decision { proposal_id: tid("mprop_1"), decided_by: by.into(), note: String::new() }),
        allow_archived: false,
        key: String::new(),
        now_ms: 20,
    };
    let Committed::Version(v) = db.commit(&approve("prin_h")).await.expect("approve") else { panic!("applied") };
    assert_eq!((v.store_version, v.changes.len(), v.memory_proposal_id.as_deref()), (1, 2, Some("mprop_1")), "one version for all changes");
    let decided = db.get_proposal("mprop_1").await.expect("get").expect("some");
    assert_eq!((decided.status, decided.applied_version, decided.decided_by.as_str()), (ProposalStatus::Approved, 1, "prin_h"));
    // A second approval: the expectations fail first (nothing committed).
    assert!(matches!(db.commit(&approve("prin_h")).await.expect("again"), Committed::Mismatch { .. }));
    let d = Decision { proposal_id: tid("mprop_1"), decided_by: "prin_h".into(), note: "no".into() };
    assert!(!db.reject_proposal(&d, 30).await.expect("reject"), "a decided proposal stays decided");
    let page = PageRequest { limit: 10, before_id: None };
    assert_eq!(db.list_proposals("mstr_d", "approved", &page).await.expect("list").len(), 1);
    assert!(db.list_proposals("mstr_d", "open", &page).await.expect("list").is_empty());
}

async fn two_concurrent_writers_one_wins(db: Arc<dyn MemoryDb>) {
    db.insert_store(&store("mstr_e"), &[]).await.expect("insert");
    assert!(matches!(db.commit(&write("mstr_e", "/race.md", Some("base"), Expect::Absent)).await.expect("base"), Committed::Version(_)));
    for round in 0..10 {
        let current = db.document("mstr_e", "/race.md", None).await.expect("doc").expect("present").sha256;
        let writers: Vec<_> = (0..2)
            .map(|w| {
                let db = db.clone();
                let commit = write("mstr_e", "/race.md", Some(&format!("round {round} writer {w}")), Expect::Sha(current.clone()));
                tokio::spawn(async move { db.commit(&commit).await.expect("commit") })
            })
            .collect();
        let mut won = 0;
        let mut lost = 0;
        for w in writers {
            match w.await.expect("join") {
                Committed::Version(_) => won += 1,
                Committed::Mismatch { current, .. } => {
                    assert!(current.is_some(), "the loser sees the winner's sha");
                    lost += 1
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!((won, lost), (1, 1), "round {round}: exactly one of two writers expecting the same sha commits");
    }
    assert_eq!(db.get_store("mstr_e").await.expect("get").map(|s| s.head_version), Some(11), "one version per round");
}

async fn deleting_a_store_removes_what_it_holds(db: &dyn MemoryDb) {
    let s = store("mstr_f");
    db.insert_store(&s, &[]).await.expect("insert");
    assert!(matches!(db.commit(&write("mstr_f", "/k.md", Some("k"), Expect::Absent)).await.expect("w"), Committed::Version(_)));
    db.record_mount("mstr_f", "sess_1").await.expect("mount");
    db.record_mount("mstr_f", "sess_1").await.expect("idempotent");
    assert_eq!(db.mounting_sessions("mstr_f").await.expect("mounts"), ["sess_1"]);
    assert!(!db.delete_store("mstr_f", 1, &[]).await.expect("active"), "only an archived store is deleted");
    let archived = Store { status: StoreStatus::Archived, archived_ms: 2, version: 2, ..s };
    assert!(db.update_store(&archived, 1, &[]).await.expect("archive"));
    assert!(db.delete_store("mstr_f", 2, &[]).await.expect("delete"));
    assert_eq!(db.get_store("mstr_f").await.expect("get"), None);
    assert!(db.documents("mstr_f", "", None, "", 10).await.expect("docs").is_empty());
    assert!(db.versions("mstr_f", None, 10).await.expect("versions").is_empty());
    assert!(db.mounting_sessions("mstr_f").await.expect("mounts").is_empty());
}

fn dream(id: &str, output: &str) -> Dream {
    use crate::dreams::model::*;
    Dream {
        id: id.into(),
        environment_id: "env_1".into(),
        status: DreamStatus::Pending,
        mode: DreamMode::Deterministic,
        input_store_id: "mstr_in".into(),
        input_store_version: 0,
        session_ids: vec![],
        routing_profile_id: None,
        instructions: String::new(),
        review: false,
        output_store_id: output.into(),
        output_proposal_id: None,
        stats: DreamStats::default(),
        usage: DreamUsage::default(),
        error: None,
        created_by: "prin_1".into(),
        created_ms: 1,
        started_ms: 0,
        ended_ms: 0,
        archived_ms: 0,
        lease_holder: String::new(),
        lease_expires_ms: 0,
        version: 1,
    }
}

async fn dreams_are_claimed_once_and_complete_all_or_nothing(db: &dyn MemoryDb) {
    use crate::dreams::model::*;
    let a = dream("drm_a", "mstr_out_a");
    let b = dream("drm_b", "mstr_out_b");
    db.insert_dream(&a).await.unwrap();
    db.insert_dream(&b).await.unwrap();
    assert_eq!(db.next_dream(100).await.unwrap().map(|d| d.id), Some("drm_a".into()), "the oldest pending first");
    // A claim is a compare-and-set: the second claimant loses.
    let running = Dream { status: DreamStatus::Running, lease_expires_ms: 1_000, version: 2, ..a.clone() };
    assert!(db.update_dream(&running, 1).await.unwrap());
    assert!(!db.update_dream(&running, 1).await.unwrap());
    assert_eq!(db.next_dream(100).await.unwrap().map(|d| d.id), Some("drm_b".into()), "a leased Dream is not offered");
    assert_eq!(db.next_dream(2_000).await.unwrap().map(|d| d.id), Some("drm_a".into()), "until its lease runs out");

    let output = |d: &Dream, expected_version: i64| {
        let mut s = store(&d.output_store_id);
        s.created_from = Some(CreatedFrom { memory_store_id: "mstr_in".into(), store_version: 0, dream_id: d.id.clone() });
        let mut copy = write(&d.output_store_id, "/a.md", Some("a"), Expect::Absent);
        copy.via = Via::Copy;
        let mut change = write(&d.output_store_id, "/a.md", Some("b"), Expect::Sha(sha("a")));
        change.via = Via::Dream;
        DreamOutput {
            dream: Dream { status: DreamStatus::Completed, version: expected_version + 1, ..d.clone() },
            expected_version,
            store: s,
            copy,
            changes: Some(change),
            proposal: None,
            events: vec![],
        }
    };
    // Canceled meanwhile: nothing is written.
    let canceled = Dream { status: DreamStatus::Canceled, version: 3, ..running.clone() };
    assert!(db.update_dream(&canceled, 2).await.unwrap());
    assert!(!db.complete_dream(&output(&running, 2)).await.unwrap());
    assert!(db.get_store("mstr_out_a").await.unwrap().is_none(), "a canceled Dream leaves no store");
    assert_eq!(db.get_dream("drm_a").await.unwrap().unwrap().status, DreamStatus::Canceled);
    // Completed: the store at version 2, both versions readable.
    assert!(db.complete_dream(&output(&b, 1)).await.unwrap());
    let out = db.get_store("mstr_out_b").await.unwrap().unwrap();
    assert_eq!(out.head_version, 2);
    assert_eq!(db.version("mstr_out_b", 1).await.unwrap().unwrap().via, Via::Copy);
    assert_eq!(db.document("mstr_out_b", "/a.md", Some(1)).await.unwrap().unwrap().sha256, sha("a"));
    assert_eq!(db.document("mstr_out_b", "/a.md", None).await.unwrap().unwrap().sha256, sha("b"));
    assert!(db.next_dream(10_000).await.unwrap().is_none(), "finished Dreams are not offered");
    // An empty copy is still version 1.
    let c = dream("drm_c", "mstr_out_c");
    db.insert_dream(&c).await.unwrap();
    let mut empty = output(&c, 1);
    empty.copy.changes.clear();
    empty.changes = None;
    assert!(db.complete_dream(&empty).await.unwrap());
    assert_eq!(db.get_store("mstr_out_c").await.unwrap().unwrap().head_version, 1);
    // Listing: newest first, by status, archived hidden unless asked.
    async fn listed(db: &dyn MemoryDb, f: DreamFilter) -> Vec<String> {
        let page = PageRequest { limit: 10, before_id: None };
        db.list_dreams(&f, &page).await.unwrap().into_iter().map(|d| d.id).collect()
    }
    assert_eq!(listed(db, DreamFilter::default()).await, ["drm_c", "drm_b", "drm_a"]);
    assert_eq!(listed(db, DreamFilter { status: Some(DreamStatus::Canceled), ..Default::default() }).await, ["drm_a"]);
    let archived = Dream { archived_ms: 5, version: 4, ..canceled };
    assert!(db.update_dream(&archived, 3).await.unwrap());
    assert_eq!(listed(db, DreamFilter::default()).await, ["drm_c", "drm_b"]);
    assert_eq!(
        listed(db, DreamFilter { include_archived: true, environment_ids: vec!["env_1".into()], ..Default::default() }).await.len(),
        3
    );
    assert!(listed(db, DreamFilter { environment_ids: vec!["env_2".into()], ..Default::default() }).await.is_empty());
}
