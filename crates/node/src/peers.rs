//! Where another role's replicas are, for the mesh channel that reaches
//! them.
//!
//! An `[endpoints]` value names one or more `https://host:port` URLs,
//! separated by commas. One URL with an IP address is one connection, as it
//! always was. Anything else — a list, or a host name — becomes a balanced
//! channel over every address the targets stand for, and host names are
//! resolved again every few seconds. That is what makes replicas share the
//! work: an HTTP/2 connection to a Kubernetes ClusterIP Service stays on the
//! one pod it first reached, so each caller would pin all its calls to one
//! replica; a headless Service's name instead resolves to every ready pod,
//! and the channel keeps one connection to each.
//!
//! Every round also probes each address with a TCP connect, and only those
//! that accept are in the channel: a replica that died stops taking a share
//! of the calls within a round (a killed pod stays in its Service's records
//! until its readiness probe fails), one that comes back rejoins, and a name
//! that also resolves to something that does not listen (`localhost`'s
//! `::1`, say) never takes a share at all. A failed lookup keeps the
//! addresses the name had; while no address answers, the names themselves
//! are dialled, so calls fail at once (Unavailable) rather than wait for a
//! replica that may never come.

use http::Uri;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tonic::transport::channel::Change;
use tonic::transport::{Channel, Endpoint};

/// How often host names are resolved again: about the time a headless
/// Service's record takes to show a new or removed pod.
pub const RESOLVE_EVERY: Duration = Duration::from_secs(5);

/// How long a new address has to accept a TCP connection before it is
/// added.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// The most URLs one `[endpoints]` value may list.
const MAX_TARGETS: usize = 64;

/// One `https://host:port` target of an `[endpoints]` value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Target {
    pub host: String,
    pub port: u16,
}

impl Target {
    /// The address itself when the host is an IP literal.
    fn literal(&self) -> Option<SocketAddr> {
        self.host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, self.port))
    }

    /// `host:port`, as a URL's authority.
    fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// Parses an `[endpoints]` value: one or more `https://host[:port]` URLs
/// (port 443 when left out) separated by commas, with no path.
pub fn parse(value: &str) -> Result<Vec<Target>, String> {
    let mut targets = BTreeSet::new();
    for url in value.split(',').map(str::trim) {
        if url.is_empty() {
            return Err(format!("{value:?} has an empty entry: list https:// URLs separated by commas"));
        }
        if !url.starts_with("https://") {
            return Err(format!("must be https:// URLs (the mesh is mutual TLS), got {url:?}"));
        }
        let uri: Uri = url.parse().map_err(|e| format!("{url:?} is not a URL: {e}"))?;
        let Some(authority) = uri.authority() else { return Err(format!("{url:?} names no host")) };
        if authority.as_str().contains('@') {
            return Err(format!("{url:?} carries credentials: the mesh authenticates by certificate"));
        }
        if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
            return Err(format!("{url:?} has a path: give only https://host:port"));
        }
        targets.insert(Target { host: authority.host().to_string(), port: authority.port_u16().unwrap_or(443) });
    }
    if targets.len() > MAX_TARGETS {
        return Err(format!("lists {} URLs; at most {MAX_TARGETS}", targets.len()));
    }
    Ok(targets.into_iter().collect())
}

/// A channel to every replica `targets` stand for. `endpoint` turns an
/// authority (`10.0.0.7:7421`) into the endpoint to dial, with its TLS.
/// Must run inside a Tokio runtime: the resolving runs as a task, which
/// ends once the channel is dropped.
pub fn channel(targets: Vec<Target>, endpoint: impl Fn(&str) -> anyhow::Result<Endpoint> + Send + 'static) -> anyhow::Result<Channel> {
    if let [one] = targets.as_slice()
        && one.literal().is_some()
    {
        return Ok(endpoint(&one.authority())?.connect_lazy());
    }
    // Building every endpoint once up front reports a bad one now.
    for t in &targets {
        endpoint(&t.authority())?;
    }
    let (channel, changes) = Channel::balance_channel::<String>(MAX_TARGETS);
    tokio::spawn(async move {
        let mut peers = Peers::default();
        loop {
            let seen = resolve(&targets).await;
            for change in peers.update(&targets, seen) {
                let change = match change {
                    Change::Insert(key, ()) => match endpoint(&key) {
                        Ok(e) => Change::Insert(key, e),
                        Err(e) => {
                            tracing::warn!(error = %format!("{e:#}"), "a mesh address could not be dialled");
                            continue;
                        }
                    },
                    Change::Remove(key) => Change::Remove(key),
                };
                if changes.send(change).await.is_err() {
                    return;
                }
            }
            tokio::time::sleep(RESOLVE_EVERY).await;
            if changes.is_closed() {
                return;
            }
        }
    });
    Ok(channel)
}

/// What one round of resolving found for each target: its addresses that
/// accept connections, or `None` when the lookup failed.
type Seen = BTreeMap<Target, Option<BTreeSet<SocketAddr>>>;

/// Resolves every target and keeps the addresses that accept a TCP
/// connection now — probed each round, so a replica that died leaves the
/// channel within a round even while its name still lists it (or it is
/// listed by address), and comes back when it listens again.
async fn resolve(targets: &[Target]) -> Seen {
    let mut candidates = Vec::with_capacity(targets.len());
    for t in targets {
        let found = match t.literal() {
            Some(addr) => Some(vec![addr]),
            None => match tokio::net::lookup_host(t.authority()).await {
                Ok(addrs) => Some(addrs.collect()),
                Err(e) => {
                    tracing::debug!(target = %t.authority(), error = %e, "resolving a mesh peer failed; keeping what it had");
                    None
                }
            },
        };
        candidates.push((t.clone(), found));
    }
    let probes = candidates.iter().flat_map(|(_, f)| f.iter().flatten().copied()).map(|a| async move { (a, accepts(a).await) });
    let live: BTreeSet<SocketAddr> =
        futures_util::future::join_all(probes).await.into_iter().filter_map(|(a, ok)| ok.then_some(a)).collect();
    candidates.into_iter().map(|(t, found)| (t, found.map(|f| f.into_iter().filter(|a| live.contains(a)).collect()))).collect()
}

async fn accepts(addr: SocketAddr) -> bool {
    matches!(tokio::time::timeout(PROBE_TIMEOUT, tokio::net::TcpStream::connect(addr)).await, Ok(Ok(_)))
}

/// The balanced channel's endpoints, by the authority each dials.
#[derive(Debug, Default)]
struct Peers {
    /// Each target's addresses as last seen.
    known: BTreeMap<Target, BTreeSet<SocketAddr>>,
    /// The keys the channel holds now.
    held: BTreeSet<String>,
}

impl Peers {
    /// The changes that bring the channel to what `seen` says; a failed
    /// lookup keeps a target's addresses, and while no target has an
    /// address the names themselves are dialled.
    fn update(&mut self, targets: &[Target], seen: Seen) -> Vec<Change<String, ()>> {
        for (t, found) in seen {
            if let Some(found) = found {
                self.known.insert(t, found);
            }
        }
        let mut want: BTreeSet<String> = self.known.values().flatten().map(SocketAddr::to_string).collect();
        if want.is_empty() {
            want = targets.iter().map(Target::authority).collect();
        }
        let mut changes: Vec<Change<String, ()>> = self.held.difference(&want).map(|k| Change::Remove(k.clone())).collect();
        changes.extend(want.difference(&self.held).map(|k| Change::Insert(k.clone(), ())));
        self.held = want;
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(host: &str, port: u16) -> Target {
        Target { host: host.into(), port }
    }

    #[test]
    fn parses_one_or_several_urls_and_refuses_the_rest() {
        assert_eq!(parse("https://checkfu-sessions:7421").unwrap(), vec![t("checkfu-sessions", 7421)]);
        assert_eq!(parse("https://10.0.0.2:1, https://10.0.0.1:1").unwrap(), vec![t("10.0.0.1", 1), t("10.0.0.2", 1)]);
        assert_eq!(parse("https://[::1]:9").unwrap(), vec![t("[::1]", 9)]);
        assert_eq!(parse("https://s").unwrap(), vec![t("s", 443)]);
        for bad in ["http://s:1", "https://s:1,", "https://s:1/v1", "https://u:p@s:1", "s:1", "https://"] {
            assert!(parse(bad).is_err(), "{bad} was accepted");
        }
        let many = (0..65).map(|i| format!("https://h{i}:1")).collect::<Vec<_>>().join(",");
        assert!(parse(&many).unwrap_err().contains("at most 64"));
    }

    #[test]
    fn literal_addresses_are_their_own() {
        assert_eq!(t("[::1]", 9).literal(), Some("[::1]:9".parse().unwrap()));
        assert_eq!(t("127.0.0.1", 9).literal(), Some("127.0.0.1:9".parse().unwrap()));
        assert_eq!(t("localhost", 9).literal(), None);
    }

    fn keys(changes: &[Change<String, ()>]) -> Vec<String> {
        changes
            .iter()
            .map(|c| match c {
                Change::Insert(k, ()) => format!("+{k}"),
                Change::Remove(k) => format!("-{k}"),
            })
            .collect()
    }

    #[test]
    fn follows_a_name_through_pods_coming_and_going() {
        let name = t("checkfu-sessions", 7421);
        let targets = [name.clone()];
        let addrs = |a: &[&str]| a.iter().map(|s| s.parse().unwrap()).collect::<BTreeSet<SocketAddr>>();
        let mut peers = Peers::default();
        // Nothing resolved yet: the name itself is dialled, so calls fail
        // fast instead of waiting.
        assert_eq!(keys(&peers.update(&targets, Seen::from([(name.clone(), None)]))), ["+checkfu-sessions:7421"]);
        // Two pods: both in, the name out.
        let two = peers.update(&targets, Seen::from([(name.clone(), Some(addrs(&["10.0.0.1:7421", "10.0.0.2:7421"])))]));
        assert_eq!(keys(&two), ["-checkfu-sessions:7421", "+10.0.0.1:7421", "+10.0.0.2:7421"]);
        // A failed lookup changes nothing.
        assert!(peers.update(&targets, Seen::from([(name.clone(), None)])).is_empty());
        // One pod replaced by another.
        let moved = peers.update(&targets, Seen::from([(name.clone(), Some(addrs(&["10.0.0.2:7421", "10.0.0.3:7421"])))]));
        assert_eq!(keys(&moved), ["-10.0.0.1:7421", "+10.0.0.3:7421"]);
        // The same answer again: nothing to do.
        assert!(peers.update(&targets, Seen::from([(name.clone(), Some(addrs(&["10.0.0.2:7421", "10.0.0.3:7421"])))])).is_empty());
    }

    #[tokio::test]
    async fn a_name_is_only_joined_by_addresses_that_listen() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let open = listener.local_addr().unwrap();
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        assert!(accepts(open).await);
        assert!(!accepts(closed).await);
        let name = t("localhost", open.port());
        let seen = resolve(std::slice::from_ref(&name)).await;
        let found = seen[&name].clone().expect("localhost resolves");
        assert!(found.contains(&open), "{found:?}");
        assert!(found.iter().all(|a| a.port() == open.port() && a.ip().is_loopback()), "{found:?}");
        let gone = t("localhost", closed.port());
        let seen = resolve(std::slice::from_ref(&gone)).await;
        assert_eq!(seen[&gone], Some(BTreeSet::new()), "nothing listens there");
    }
}
