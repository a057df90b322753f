//! The mesh as separate `checkfu serve` processes against PostgreSQL — one
//! process for governance + model-gateway (+ the roles without behaviour),
//! one for sessions + runner + capability-gateway, one for the gateway —
//! passes the journey.
//! Runs when `CHECKFU_TEST_POSTGRES_URL` is set (CI sets it).
#![cfg(test)]

use checkfu_e2e::procs::{fresh_database, serve};
use checkfu_e2e::*;

#[tokio::test(flavor = "multi_thread")]
async fn separate_serve_processes_on_postgres_pass_the_journey() {
    let Some(pg) = checkfu_core::testing::postgres("the multi-process journey on PostgreSQL") else {
        return;
    };
    let db = fresh_database(&pg, "e2e").await;
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("admin.key");
    let (_control, control) = serve(
        dir.path(),
        "control",
        "governance,model-gateway,webhooks",
        &format!("storage = \"{db}\"\nbootstrap_key_file = \"{}\"\n", key_file.display()),
        &[],
    );
    let (_sessions, sessions) = serve(
        dir.path(),
        "sessions",
        "sessions,runner,capability-gateway,scheduler,memory",
        &format!("storage = \"{db}\"\n[endpoints]\nmodel-gateway = \"{}\"\ngovernance = \"{}\"\n", control.mesh(), control.mesh()),
        &[],
    );
    let (_gateway, gateway) = serve(
        dir.path(),
        "gateway",
        "gateway",
        &format!(
            "storage = \"{db}\"\n[endpoints]\ngovernance = \"{c}\"\nmodel-gateway = \"{c}\"\nsessions = \"{s}\"\ncapability-gateway = \"{s}\"\nscheduler = \"{s}\"\nmemory = \"{s}\"\nwebhooks = \"{c}\"\n",
            s = sessions.mesh(),
            c = control.mesh()
        ),
        &[],
    );
    let gateway = gateway.public.clone();
    wait_ready(&gateway).await;
    let admin = Api::new(&gateway, std::fs::read_to_string(&key_file).unwrap().trim());
    let envs = admin.get("/v1/environments").await;
    expect(&envs, 200, None);
    let env_id = id(&envs.1["data"][0]);
    run_journey(&gateway, &gateway, &admin, &env_id).await;

    // Every role answers its own health and metrics.
    for base in [&control.public, &sessions.public, &gateway] {
        assert_eq!(reqwest::get(format!("{base}/healthz")).await.unwrap().status(), 200);
        let m = reqwest::get(format!("{base}/metrics")).await.unwrap().text().await.unwrap();
        assert!(m.contains("checkfu_requests_total"), "{base} exposes request metrics");
    }
}
