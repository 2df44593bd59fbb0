//! The controllers: watches that keep the shared store (the index beside the API server),
//! leader election, the status writer around [`kubeplace_policy::status`], and the
//! headroom counter beside it, and the leader's finishing of Placement writes left open.
//!
//! Every replica watches and keeps its store, for the webhook; only the leader writes
//! status.

mod device_reservations;
pub mod finalizer;
pub(crate) mod headroom;
pub mod lease;
pub(crate) mod mirror;
pub(crate) mod open_writes;
pub mod reconciler;
pub(crate) mod reservations;
pub mod status;
pub(crate) mod trigger;
pub mod watch;

/// Waits until this replica leads and its store has synced; false when either channel
/// closed (the process is stopping). The leader's loops start each round with it.
pub(crate) async fn leading_and_ready(
    leader: &mut tokio::sync::watch::Receiver<bool>,
    ready: &mut tokio::sync::watch::Receiver<bool>,
) -> bool {
    ready.wait_for(|r| *r).await.is_ok() && leader.wait_for(|l| *l).await.is_ok()
}

/// Runs `pass` every `period` while this replica leads and its store has synced, until
/// `cancel` or the process stops: the leader's periodic loops.
pub(crate) async fn every_while_leading<F, Fut>(
    mut leader: tokio::sync::watch::Receiver<bool>,
    mut ready: tokio::sync::watch::Receiver<bool>,
    cancel: &tokio_util::sync::CancellationToken,
    period: std::time::Duration,
    mut pass: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            leading = leading_and_ready(&mut leader, &mut ready) => {
                if !leading { return }
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
        pass().await;
    }
}
