//! How a generated client reaches its service: over HTTP/2 to another
//! process, or straight into the same process's generated server. Either way
//! requests and responses are encoded and decoded as protobuf by tonic, so a
//! role behaves identically local or remote; the local form only skips the
//! socket and the HTTP/2 connection tasks.
use std::convert::Infallible;
use tower::util::BoxCloneSyncService;
use tower::{Service, ServiceExt};

pub type Request = http::Request<tonic::body::Body>;
pub type Response = http::Response<tonic::body::Body>;

/// A type-erased client transport, cheap to clone.
pub type Transport = BoxCloneSyncService<Request, Response, TransportError>;

/// A failure to reach the service (tonic reports it as `unavailable`).
/// A concrete type, so clients stay usable inside spawned tasks.
#[derive(Debug)]
pub struct TransportError(tower::BoxError);

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for TransportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.0.as_ref())
    }
}

/// Every call carries the caller's trace context (`traceparent`).
fn with_context(mut req: Request) -> Request {
    checkfu_telemetry::inject(req.headers_mut());
    req
}

/// A remote service over an HTTP/2 channel.
pub fn remote(channel: tonic::transport::Channel) -> Transport {
    BoxCloneSyncService::new(channel.map_request(with_context).map_err(|e| TransportError(e.into())))
}

/// A service in this process: a generated tonic server (e.g.
/// `SessionsServiceServer<...>`, behind [`crate::mesh::Authorized`]),
/// called directly. The call runs in a server span that continues the
/// caller's trace, as a remote call would. Calls carry no caller until
/// [`acting_as`] names one, and the mesh refuses calls without one.
pub fn local<S>(server: S) -> Transport
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + Sync + 'static,
    S::Future: Send + 'static,
{
    use tracing::Instrument;
    let traced = tower::service_fn(move |req: Request| {
        let req = with_context(req);
        let path = req.uri().path().to_string();
        let span = tracing::info_span!("grpc", otel.name = %path, otel.kind = "server", checkfu.role = checkfu_telemetry::role_of(&path));
        checkfu_telemetry::adopt(&span, req.headers());
        server.clone().oneshot(req).instrument(span)
    });
    BoxCloneSyncService::new(traced.map_err(|never: Infallible| match never {}))
}

/// A service in this process that starts after its caller was built: calls
/// go to what `slot` holds once it is filled, and fail as unavailable
/// before (the node fills it before it serves anything).
pub fn later(slot: std::sync::Arc<std::sync::OnceLock<Transport>>) -> Transport {
    use futures_util::future::{BoxFuture, FutureExt};
    BoxCloneSyncService::new(tower::service_fn(move |req: Request| -> BoxFuture<'static, Result<Response, TransportError>> {
        match slot.get() {
            Some(t) => t.clone().oneshot(req).boxed(),
            None => futures_util::future::ready(Err(TransportError("the service has not started yet".into()))).boxed(),
        }
    }))
}

/// One role's services in process when it serves more than one: calls to
/// the gRPC service `name` go to `this`, everything else to `rest`.
pub fn either(name: &'static str, this: Transport, rest: Transport) -> Transport {
    BoxCloneSyncService::new(tower::service_fn(move |req: Request| {
        let mine = req.uri().path().strip_prefix('/').and_then(|p| p.split_once('/')).is_some_and(|(service, _)| service == name);
        if mine { this.clone().oneshot(req) } else { rest.clone().oneshot(req) }
    }))
}

/// Calls through a [`local`] transport as the role `caller`: the caller's
/// identity in process, as a request extension (which never crosses a
/// socket). Over the mesh the server reads the caller from the client's TLS
/// certificate instead, so remote transports need no wrapping.
pub fn acting_as(transport: Transport, caller: checkfu_core::Role) -> Transport {
    let caller = crate::mesh::Caller::of([caller]);
    BoxCloneSyncService::new(transport.map_request(move |mut req: Request| {
        req.extensions_mut().insert(caller);
        req
    }))
}
