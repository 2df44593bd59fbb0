//! How the operator stops: on SIGTERM it reports not ready, lets leadership go, serves
//! until the drain ends, then stops its servers; Ctrl-C or a second signal skips the drain.

/// The signal that asked the process to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// SIGTERM, as the kubelet sends: drain first.
    Terminate,
    /// Ctrl-C: stop at once.
    Interrupt,
}

/// Waits for SIGTERM or Ctrl-C.
pub(crate) async fn signal() -> Stop {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => Stop::Interrupt,
                    _ = term.recv() => Stop::Terminate,
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                Stop::Interrupt
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        Stop::Interrupt
    }
}
