//! The API's heavy work: searches (`GET /allocation_candidates`, `/kubeplace/explain`,
//! `/kubeplace/headroom`). One may keep a core busy for a second and hold a few hundred MiB,
//! so at most [`SearchLimits::concurrent`] run at once, at most [`SearchLimits::queued`] more
//! wait their turn (each for at most [`SearchLimits::wait`]), and any other is answered 503
//! with `Retry-After` at once. A search that runs past [`SearchLimits::deadline`], or whose
//! caller goes away, is stopped where it is and its worker thread given back.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http::{Method, StatusCode};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use kubeplace_core::placement::candidates::Stop;

use super::wire::ApiError;

/// How much search work the API takes on at once, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchLimits {
    /// Searches running at once.
    pub concurrent: usize,
    /// Searches waiting for one of those to end; more are refused at once.
    pub queued: usize,
    /// How long a search waits for its turn before it is refused.
    pub wait: Duration,
    /// How long a search may run before it is stopped.
    pub deadline: Duration,
}

impl SearchLimits {
    /// One search a core at once (each uses a core while it runs; more only share them),
    /// four times as many waiting, two seconds' wait and ten seconds' run.
    pub fn for_cores(cores: usize) -> SearchLimits {
        let concurrent = cores.max(1);
        SearchLimits {
            concurrent,
            queued: concurrent * 4,
            wait: Duration::from_secs(2),
            deadline: DEFAULT_DEADLINE,
        }
    }
}

impl Default for SearchLimits {
    fn default() -> Self {
        SearchLimits::for_cores(kubeplace_core::runs::cores())
    }
}

/// How long a search may run by default: far beyond any search within its budget of steps
/// on an idle server, so only a starved or stalled one meets it.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(10);

/// Whether a request is a search, bound by [`Searches`]: its path read as the router reads
/// it, so that no spelling the router takes (`//allocation_candidates`,
/// `/kubeplace//headroom/`) goes around the bound.
pub(crate) fn is_search(method: &Method, path: &str) -> bool {
    super::routes::Route::of(path).is_some_and(|r| r.is_search(method))
}

/// The searches running and waiting.
pub(crate) struct Searches {
    limits: SearchLimits,
    running: Arc<Semaphore>,
    waiting: AtomicUsize,
}

/// A search's turn: its place among the running ones, given back when dropped.
pub(crate) struct Turn {
    _permit: OwnedSemaphorePermit,
    /// Whether it waited in the queue for it.
    pub(crate) queued: bool,
}

impl Searches {
    pub(crate) fn new(limits: SearchLimits) -> Searches {
        Searches {
            limits,
            running: Arc::new(Semaphore::new(limits.concurrent.max(1))),
            waiting: AtomicUsize::new(0),
        }
    }

    pub(crate) fn limits(&self) -> SearchLimits {
        self.limits
    }

    /// Waits for a turn to run a search: at once when one is free, else in the queue for at
    /// most the limits' wait; a 503 with `Retry-After` when the queue is full or the wait
    /// ends first.
    pub(crate) async fn turn(&self) -> Result<Turn, ApiError> {
        if let Ok(permit) = self.running.clone().try_acquire_owned() {
            return Ok(Turn {
                _permit: permit,
                queued: false,
            });
        }
        let queued = self.waiting.fetch_add(1, Ordering::AcqRel);
        let _leave = Leave(&self.waiting);
        if queued >= self.limits.queued {
            return Err(busy(format!(
                "{} searches are running and {} waiting, as many as this server takes; retry in a second",
                self.limits.concurrent, self.limits.queued
            )));
        }
        match tokio::time::timeout(self.limits.wait, self.running.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(Turn {
                _permit: permit,
                queued: true,
            }),
            // The semaphore is never closed; were it, the server is stopping.
            Ok(Err(_)) => Err(busy("the server is stopping".to_string())),
            Err(_) => Err(busy(format!(
                "no search ended within {} s to make room for this one; retry in a second",
                self.limits.wait.as_secs_f64()
            ))),
        }
    }
}

/// Leaves the queue when dropped, also when the caller goes away while waiting.
struct Leave<'a>(&'a AtomicUsize);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A 503 that asks the caller to come back in a second.
fn busy(detail: String) -> ApiError {
    let mut e = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, detail);
    e.retry_after = Some(1);
    e
}

/// The answer of a search that was stopped at its deadline.
pub(crate) fn past_deadline(deadline: Duration) -> ApiError {
    busy(format!(
        "the search ran past this server's deadline of {} s and was stopped; retry, or ask with a limit or fewer request groups",
        deadline.as_secs_f64()
    ))
}

/// Stops a search when dropped: the future answering a request is dropped when its caller
/// goes away, and the search it started must not go on for nobody.
pub(crate) struct StopOnDrop(pub Stop);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(concurrent: usize, queued: usize, wait_ms: u64) -> SearchLimits {
        SearchLimits {
            concurrent,
            queued,
            wait: Duration::from_millis(wait_ms),
            deadline: DEFAULT_DEADLINE,
        }
    }

    #[test]
    fn searches_are_the_get_requests_of_the_three_search_paths() {
        assert!(is_search(&Method::GET, "/allocation_candidates"));
        assert!(is_search(&Method::GET, "/allocation_candidates/"));
        assert!(is_search(&Method::GET, "/kubeplace/explain"));
        assert!(is_search(&Method::GET, "/kubeplace/headroom"));
        assert!(!is_search(&Method::POST, "/allocation_candidates"));
        assert!(!is_search(&Method::GET, "/allocations"));
        assert!(!is_search(&Method::GET, "/resource_providers"));
    }

    /// Every spelling of a search path the router answers is a search: doubled, leading and
    /// trailing slashes.
    #[test]
    fn every_spelling_the_router_takes_is_a_search() {
        for path in [
            "//allocation_candidates",
            "///allocation_candidates//",
            "//kubeplace/explain",
            "/kubeplace//explain",
            "//kubeplace/headroom",
            "/kubeplace//headroom",
            "/kubeplace/headroom//",
            "//kubeplace//headroom//",
        ] {
            assert!(is_search(&Method::GET, path), "{path}");
            assert!(
                super::super::routes::Route::of(path).is_some(),
                "the router answers {path}"
            );
        }
        assert!(!is_search(&Method::GET, "/kubeplace/headroom/x"));
        assert!(!is_search(&Method::GET, "/allocation_candidatesx"));
    }

    #[tokio::test]
    async fn a_full_queue_is_refused_at_once_with_retry_after() {
        let searches = Arc::new(Searches::new(limits(1, 1, 60_000)));
        let running = searches.turn().await.expect("a free turn");
        // One waits in the queue (for a minute at most)...
        let waiter = {
            let s = searches.clone();
            tokio::spawn(async move { s.turn().await.map(|_| ()) })
        };
        while searches.waiting.load(Ordering::Acquire) == 0 {
            tokio::task::yield_now().await;
        }
        // ...so the next finds the queue full and is refused without waiting.
        let refused = tokio::time::timeout(Duration::from_secs(5), searches.turn())
            .await
            .expect("refused at once")
            .err()
            .expect("refused");
        assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.retry_after, Some(1));
        assert!(refused.detail.contains("1 waiting"), "{}", refused.detail);
        // The running one ends: the waiter gets its turn, and the queue is empty again.
        drop(running);
        waiter.await.unwrap().expect("its turn");
        assert_eq!(searches.waiting.load(Ordering::Acquire), 0);
    }

    #[tokio::test]
    async fn a_wait_longer_than_the_limit_is_refused() {
        let searches = Searches::new(limits(1, 4, 50));
        let _running = searches.turn().await.expect("a free turn");
        let refused = searches.turn().await.err().expect("refused");
        assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(refused.detail.contains("0.05 s"), "{}", refused.detail);
        assert_eq!(searches.waiting.load(Ordering::Acquire), 0);
    }

    #[tokio::test]
    async fn a_caller_gone_while_waiting_leaves_the_queue() {
        let searches = Arc::new(Searches::new(limits(1, 1, 60_000)));
        let _running = searches.turn().await.expect("a free turn");
        let s = searches.clone();
        let waiter = tokio::spawn(async move { s.turn().await.map(|_| ()) });
        while searches.waiting.load(Ordering::Acquire) == 0 {
            tokio::task::yield_now().await;
        }
        waiter.abort();
        let _ = waiter.await;
        assert_eq!(searches.waiting.load(Ordering::Acquire), 0);
    }

    #[test]
    fn dropping_the_guard_stops_the_search() {
        let stop = Stop::new();
        drop(StopOnDrop(stop.clone()));
        assert!(stop.is_stopped());
    }
}
