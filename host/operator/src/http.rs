//! `/healthz` (the process serves), `/readyz` (the checks have been listed and loaded) and `/metrics`
//! (Prometheus text format).

use crate::metrics::Metrics;
use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Binds `address` (port 0 picks a free port) and returns the bound address and the serving future.
pub async fn serve(
    address: SocketAddr,
    metrics: Arc<Metrics>,
    synced: watch::Receiver<bool>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<(SocketAddr, impl Future<Output = std::io::Result<()>>)> {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let ready = *synced.borrow();
                async move {
                    if ready {
                        (StatusCode::OK, "ready")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "loading checks")
                    }
                }
            }),
        )
        .route(
            "/metrics",
            get(move || {
                let text = metrics.render();
                async move {
                    (
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        text,
                    )
                        .into_response()
                }
            }),
        );
    let listener = TcpListener::bind(address).await?;
    let bound = listener.local_addr()?;
    Ok((bound, async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
    }))
}
