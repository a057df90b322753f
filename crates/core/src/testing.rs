//! Real services in tests: a test that needs one (PostgreSQL, Redis, a
//! Kafka broker, bubblewrap, the chart tools) asks here, so that a missing
//! one is never a silent pass.
//!
//! - With `CHECKFU_REQUIRE_SERVICES=1` (set by `.ci/run`) a missing service
//!   fails the test.
//! - Without it, the test skips that part and prints one line to stdout
//!   naming what was skipped and why.

/// Whether missing services fail tests (`CHECKFU_REQUIRE_SERVICES=1`).
pub fn services_required() -> bool {
    std::env::var("CHECKFU_REQUIRE_SERVICES").is_ok_and(|v| v == "1" || v == "true")
}

/// Records that `what` is skipped because `why`; panics instead when
/// services are required.
#[track_caller]
pub fn skip(what: &str, why: &str) {
    if services_required() {
        panic!("{what} needs a service that is missing ({why}); CHECKFU_REQUIRE_SERVICES=1 forbids skipping it");
    }
    println!("skipped: {what}: {why}");
}

/// The value of the environment variable `var` naming a test service, or
/// `None` after [`skip`]ping `what`.
#[track_caller]
pub fn service(var: &str, what: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Some(v),
        _ => {
            skip(what, &format!("{var} is not set"));
            None
        }
    }
}

/// The PostgreSQL URL of the test server (`CHECKFU_TEST_POSTGRES_URL`).
#[track_caller]
pub fn postgres(what: &str) -> Option<String> {
    service("CHECKFU_TEST_POSTGRES_URL", what)
}

/// A typed id from a test's literal (`tid("agt_1")`), unchecked as one read
/// back from a store is: tests name their fixtures with short ids.
pub fn tid<T: crate::id::TypedId>(s: &str) -> T {
    T::stored(s.to_string())
}

/// A schema of its own for one test run on a shared PostgreSQL
/// (`<service>_test_<ulid>`), so runs never see each other's rows.
pub fn fresh_schema(service: &str) -> String {
    format!("{service}_test_{}", crate::id::new_id("t").trim_start_matches("t_"))
}
