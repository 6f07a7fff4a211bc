//! The stop request of a process: SIGINT (Ctrl-C) or SIGTERM (what
//! systemd, Kubernetes and `kill` send). One place for the service's
//! graceful shutdown, the telemetry agent's and `evaluate`'s cleanup.

/// Resolves on the first SIGINT or SIGTERM (SIGINT only off Unix). A signal
/// that cannot be listened for is logged at warn level and never resolves,
/// so the other one still can.
pub async fn interrupt_or_terminate() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for ctrl-c");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
