//! [`RoutingStore`] in SQL, one text for both dialects.

use super::RoutingStore;
use crate::model::{Candidate, RoutingProfile, StoredCandidate};
use checkfu_core::id::RoutingProfileId;
use checkfu_core::page::PageRequest;
use checkfu_core::{Error, Result};
use checkfu_store::sqlx::{self, Row, any::AnyRow};
use checkfu_store::{Db, db_err, find_one};

pub struct SqlRoutingStore {
    db: Db,
}

impl SqlRoutingStore {
    pub fn new(db: Db) -> Self {
        SqlRoutingStore { db }
    }
}

fn profile(r: &AnyRow) -> Result<RoutingProfile> {
    let raw: String = r.try_get("candidates_json").map_err(db_err)?;
    let stored: Vec<StoredCandidate> =
        serde_json::from_str(&raw).map_err(|e| Error::internal(format!("stored candidates unreadable: {e}")))?;
    let candidates = stored.iter().enumerate().map(|(i, c)| Candidate::parse(i, c)).collect::<Result<_>>()?;
    Ok(RoutingProfile {
        id: r.try_get("id").map_err(db_err)?,
        environment_id: r.try_get("environment_id").map_err(db_err)?,
        name: r.try_get("name").map_err(db_err)?,
        candidates,
        created_ms: r.try_get("created_ms").map_err(db_err)?,
    })
}

#[async_trait::async_trait]
impl RoutingStore for SqlRoutingStore {
    async fn insert(&self, p: &RoutingProfile) -> Result<()> {
        let stored: Vec<StoredCandidate> = p.candidates.iter().map(Candidate::stored).collect();
        let json = serde_json::to_string(&stored).map_err(|e| Error::internal(e.to_string()))?;
        sqlx::query("INSERT INTO routing_profiles (id, environment_id, name, candidates_json, created_ms) VALUES ($1, $2, $3, $4, $5)")
            .bind(&p.id)
            .bind(&p.environment_id)
            .bind(&p.name)
            .bind(json)
            .bind(p.created_ms)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn get(&self, id: &RoutingProfileId) -> Result<Option<RoutingProfile>> {
        find_one(&self.db, "SELECT * FROM routing_profiles WHERE id = $1", id, profile).await
    }

    async fn list(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<RoutingProfile>> {
        let sql = "SELECT * FROM routing_profiles WHERE environment_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3";
        checkfu_store::list_in_envs(&self.db, sql, environment_ids, page, profile, |p| &p.id).await
    }
}

#[cfg(test)]
mod conformance {
    //! Conformance for [`RoutingStore`]: SQLite always, PostgreSQL when
    //! `CHECKFU_TEST_POSTGRES_URL` is set.
    use super::*;
    use crate::model::{Effort, Provider};
    use checkfu_core::testing::tid;
    use checkfu_store::Location;

    fn profile(id: &str, env: &str, name: &str) -> RoutingProfile {
        RoutingProfile {
            id: tid(id),
            environment_id: tid(env),
            name: name.into(),
            candidates: vec![Candidate {
                provider: Provider::Scripted,
                model: "s".into(),
                effort: Effort::High,
                connection_id: None,
                endpoint: None,
                legacy_base_url: false,
            }],
            created_ms: 1,
        }
    }

    async fn suite(s: &dyn RoutingStore) {
        s.insert(&profile("mrp_1", "env_a", "fast")).await.expect("insert");
        s.insert(&profile("mrp_2", "env_b", "fast")).await.expect("same name in another env");
        s.insert(&profile("mrp_3", "env_a", "slow")).await.expect("insert");
        assert!(s.insert(&profile("mrp_4", "env_a", "fast")).await.is_err(), "names unique per environment");
        assert_eq!(s.get(&tid("mrp_1")).await.expect("get"), Some(profile("mrp_1", "env_a", "fast")));
        let page = PageRequest::standard(10, "").expect("page");
        let ids: Vec<String> = s.list(&["env_a".into()], &page).await.expect("list").into_iter().map(|p| p.id.to_string()).collect();
        assert_eq!(ids, vec!["mrp_3", "mrp_1"]);
        let both = s.list(&["env_a".into(), "env_b".into()], &page).await.expect("list");
        assert_eq!(both.len(), 3);
        assert_eq!(both[0].id, "mrp_3");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn routing_store_conformance() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(&Location::SqliteDir(dir.path().into()), "model_gateway", &crate::MIGRATIONS).await.expect("sqlite");
        suite(&SqlRoutingStore::new(db)).await;
        if let Some(url) = checkfu_core::testing::postgres("the routing store on PostgreSQL") {
            let schema = checkfu_core::testing::fresh_schema("mg");
            let db = Db::open(&Location::Postgres(url), &schema, &crate::MIGRATIONS).await.expect("postgres");
            suite(&SqlRoutingStore::new(db)).await;
        }
    }
}
