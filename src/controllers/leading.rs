//! Work that runs only while this replica leads and its store is ready: waiting for both,
//! and doing a thing every so often while they hold.

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
