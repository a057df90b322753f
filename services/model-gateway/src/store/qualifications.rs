//! [`QualificationStore`] in SQL, one text for both dialects.

use super::QualificationStore;
use crate::model::Provider;
use crate::qualifications::{Purpose, Qualification};
use checkfu_core::id::{EvaluatorQualificationId, TypedId};
use checkfu_core::page::PageRequest;
use checkfu_core::{Error, Result};
use checkfu_store::sqlx::{self, Row, any::AnyRow};
use checkfu_store::{Db, db_err, find_one};

pub struct SqlQualificationStore {
    db: Db,
}

impl SqlQualificationStore {
    pub fn new(db: Db) -> Self {
        SqlQualificationStore { db }
    }
}

fn qualification(r: &AnyRow) -> Result<Qualification> {
    let text = |c: &str| r.try_get::<String, _>(c).map_err(db_err);
    let stored = |e: Error| Error::internal(format!("a stored evaluator qualification is unreadable: {}", e.message));
    Ok(Qualification {
        id: EvaluatorQualificationId::stored(text("id")?),
        provider: Provider::parse("provider", &text("provider")?).map_err(stored)?,
        model: text("model")?,
        purpose: Purpose::parse("purpose", &text("purpose")?).map_err(stored)?,
        evidence: text("evidence")?,
        reviewed_ms: r.try_get("reviewed_ms").map_err(db_err)?,
        expires_ms: r.try_get("expires_ms").map_err(db_err)?,
        revoked_ms: r.try_get("revoked_ms").map_err(db_err)?,
        created_by: text("created_by")?,
        created_ms: r.try_get("created_ms").map_err(db_err)?,
    })
}

#[async_trait::async_trait]
impl QualificationStore for SqlQualificationStore {
    async fn insert(&self, q: &Qualification) -> Result<()> {
        sqlx::query(
            "INSERT INTO evaluator_qualifications (id, provider, model, purpose, evidence, reviewed_ms, expires_ms, status, created_by, created_ms, revoked_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(q.id.as_str())
        .bind(q.provider.as_str())
        .bind(&q.model)
        .bind(q.purpose.as_str())
        .bind(&q.evidence)
        .bind(q.reviewed_ms)
        .bind(q.expires_ms)
        .bind(q.status())
        .bind(&q.created_by)
        .bind(q.created_ms)
        .bind(q.revoked_ms)
        .execute(&self.db.pool)
        .await
        .map_err(db_err)?;
        Ok(())
    }

    async fn get(&self, id: &EvaluatorQualificationId) -> Result<Option<Qualification>> {
        find_one(&self.db, "SELECT * FROM evaluator_qualifications WHERE id = $1", id, qualification).await
    }

    async fn list(&self, page: &PageRequest) -> Result<Vec<Qualification>> {
        let rows = sqlx::query("SELECT * FROM evaluator_qualifications WHERE id < $1 ORDER BY id DESC LIMIT $2")
            .bind(page.before())
            .bind(page.fetch_limit())
            .fetch_all(&self.db.reads)
            .await
            .map_err(db_err)?;
        rows.iter().map(qualification).collect()
    }

    async fn revoke(&self, id: &EvaluatorQualificationId, now: i64) -> Result<bool> {
        let done =
            sqlx::query("UPDATE evaluator_qualifications SET status = 'revoked', revoked_ms = $2 WHERE id = $1 AND status = 'active'")
                .bind(id.as_str())
                .bind(now)
                .execute(&self.db.pool)
                .await
                .map_err(db_err)?;
        Ok(done.rows_affected() == 1)
    }

    async fn current(&self, provider: &str, model: &str, purpose: Purpose, now: i64) -> Result<Option<Qualification>> {
        let row = sqlx::query(
            "SELECT * FROM evaluator_qualifications WHERE provider = $1 AND model = $2 AND purpose = $3 AND status = 'active' \
             AND reviewed_ms <= $4 AND expires_ms > $4 ORDER BY id DESC LIMIT 1",
        )
        .bind(provider)
        .bind(model)
        .bind(purpose.as_str())
        .bind(now)
        .fetch_optional(&self.db.reads)
        .await
        .map_err(db_err)?;
        row.as_ref().map(qualification).transpose()
    }
}

#[cfg(test)]
mod conformance {
    //! Conformance for [`QualificationStore`]: SQLite always, PostgreSQL
    //! when `CHECKFU_TEST_POSTGRES_URL` is set.
    use super::*;
    use checkfu_store::Location;

    fn q(model: &str, purpose: Purpose, reviewed_ms: i64, expires_ms: i64) -> Qualification {
        Qualification {
            id: EvaluatorQualificationId::mint(),
            provider: Provider::Scripted,
            model: model.into(),
            purpose,
            evidence: "suite".into(),
            reviewed_ms,
            expires_ms,
            revoked_ms: 0,
            created_by: "prin_admin".into(),
            created_ms: 1,
        }
    }

    async fn suite(s: &dyn QualificationStore) {
        let a = q("m", Purpose::Decision, 100, 1_000);
        let b = q("m", Purpose::DeliveryScreen, 100, 1_000);
        let later = q("m", Purpose::Decision, 500, 2_000);
        for x in [&a, &b, &later] {
            s.insert(x).await.expect("insert");
        }
        assert_eq!(s.get(&a.id).await.expect("get"), Some(a.clone()));
        let current = |now| async move { s.current("scripted", "m", Purpose::Decision, now).await.expect("current").map(|q| q.id) };
        assert_eq!(current(50).await, None, "before its review");
        assert_eq!(current(200).await, Some(a.id.clone()));
        assert_eq!(current(600).await, Some(later.id.clone()), "the newest current one");
        assert_eq!(current(1_500).await, Some(later.id.clone()), "a expired");
        assert_eq!(current(2_000).await, None, "both expired");
        assert_eq!(s.current("scripted", "other", Purpose::Decision, 200).await.expect("current"), None, "another model");

        assert!(s.revoke(&later.id, 700).await.expect("revoke"));
        assert!(!s.revoke(&later.id, 800).await.expect("revoke twice"), "revoked once");
        assert_eq!(s.get(&later.id).await.expect("get").map(|q| (q.status(), q.revoked_ms)), Some(("revoked", 700)));
        assert_eq!(current(600).await, Some(a.id.clone()), "a revoked qualification is never current");

        let page = PageRequest::standard(2, "").expect("page");
        let ids: Vec<_> = s.list(&page).await.expect("list").into_iter().map(|q| q.id).collect();
        assert_eq!(ids, vec![later.id.clone(), b.id.clone(), a.id.clone()], "newest first, one extra row");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn qualification_store_conformance() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(&Location::SqliteDir(dir.path().into()), "model_gateway", &crate::MIGRATIONS).await.expect("sqlite");
        suite(&SqlQualificationStore::new(db)).await;
        if let Some(url) = checkfu_core::testing::postgres("the qualification store on PostgreSQL") {
            let schema = checkfu_core::testing::fresh_schema("mgq");
            let db = Db::open(&Location::Postgres(url), &schema, &crate::MIGRATIONS).await.expect("postgres");
            suite(&SqlQualificationStore::new(db)).await;
        }
    }
}
