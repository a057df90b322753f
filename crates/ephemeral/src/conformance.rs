//! One conformance suite for [`Fanout`], [`RateLimiter`] and [`Epochs`]: the in-process
//! twins always, Redis when `CHECKFU_TEST_REDIS_URL` is set (CI sets it).

use super::*;
use std::sync::Arc;

async fn fanout(f: Arc<dyn Fanout>, prefix: &str) {
    let mut a = f.subscribe_prefix(prefix).await.expect("subscribe");
    let mut b = f.subscribe_prefix(prefix).await.expect("subscribe");
    for n in 0..5u8 {
        f.publish(&format!("{prefix}sess_{}", n % 2), vec![n]).await.expect("publish");
    }
    f.publish("elsewhere:sess_1", vec![99]).await.expect("publish");
    for sub in [&mut a, &mut b] {
        let mut got = vec![];
        for _ in 0..5 {
            let m = tokio::time::timeout(Duration::from_secs(5), sub.recv()).await.expect("in time").expect("open");
            got.push(m);
        }
        assert_eq!(got.iter().map(|(_, p)| p[0]).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4], "in publish order, every subscriber");
        assert_eq!(got[1].0, format!("{prefix}sess_1"));
        assert!(tokio::time::timeout(Duration::from_millis(200), sub.recv()).await.is_err(), "other prefixes are not delivered");
    }
}

async fn limiter(l: Arc<dyn RateLimiter>, key: &str) {
    let w = Duration::from_millis(400);
    for _ in 0..3 {
        assert_eq!(l.hit(key, 3, w).await.expect("hit"), Admit::Yes);
    }
    match l.hit(key, 3, w).await.expect("hit") {
        Admit::No { retry_after } => assert!(retry_after <= w && retry_after > Duration::ZERO, "{retry_after:?}"),
        Admit::Yes => panic!("the fourth hit in a window of 3 is refused"),
    }
    assert_eq!(l.hit(&format!("{key}-other"), 3, w).await.expect("hit"), Admit::Yes, "keys are independent");
    tokio::time::sleep(w + Duration::from_millis(50)).await;
    assert_eq!(l.hit(key, 3, w).await.expect("hit"), Admit::Yes, "a new window starts over");
}

/// `a` and `b` are two handles on one store (two replicas' views).
async fn epochs(a: Arc<dyn Epochs>, b: Arc<dyn Epochs>, name: &str) {
    assert_eq!(a.current(name).await.expect("current"), None, "no token until the writer makes one");
    a.ensure(name).await.expect("ensure");
    let first = b.current(name).await.expect("current").expect("a token, through the other handle");
    assert!(first.len() >= 16, "{first:?}");
    a.ensure(name).await.expect("ensure");
    assert_eq!(a.current(name).await.expect("current"), Some(first.clone()), "ensure and reading leave a token as it is");
    b.advance(name).await.expect("advance");
    let second = a.current(name).await.expect("current").expect("token");
    assert_ne!(second, first, "an advance through one handle is read through the other");
    a.advance(name).await.expect("advance");
    let third = b.current(name).await.expect("current").expect("token");
    assert!(third != first && third != second, "never a token seen before");
    let other = format!("{name}-other");
    a.advance(&other).await.expect("advance");
    assert_ne!(a.current(&other).await.expect("current"), Some(third.clone()), "epochs are independent");
    assert_eq!(b.current(name).await.expect("current"), Some(third), "advancing another epoch leaves this one");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_in_process_twins_conform() {
    let e = Arc::new(memory::MemoryEpochs::default());
    epochs(e.clone(), e, "decisions").await;
    fanout(Arc::new(memory::MemoryFanout::default()), "checkfu:t:").await;
    limiter(Arc::new(memory::MemoryLimiter::default()), "prin_1").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_conforms() {
    let Some(url) = checkfu_core::testing::service("CHECKFU_TEST_REDIS_URL", "the ephemeral conformance on Redis") else {
        return;
    };
    let r = redis_impl::Redis::connect(&url).await.expect("connect");
    assert!(r.ping().await);
    let unique = checkfu_core::id::new_id("t");
    fanout(Arc::new(r.clone()), &format!("checkfu:{unique}:")).await;
    let other = redis_impl::Redis::connect(&url).await.expect("connect");
    epochs(Arc::new(r.clone()), Arc::new(other), &unique).await;
    limiter(Arc::new(r), &unique).await;
}
