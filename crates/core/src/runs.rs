//! Work cut into runs, one run a thread: how a large manifest is read and a large answer
//! written on every core, with what each run gives kept in order.

/// `f` over `work` cut into at most `threads` runs of about equal length, each run on a
/// thread of its own (on the caller's thread when there is one run); what each run gives,
/// in the order of the runs. A panic in a run is raised again here.
pub fn in_runs<W: Sync, T: Send>(
    work: &[W],
    threads: usize,
    f: impl Fn(&[W]) -> T + Sync,
) -> Vec<T> {
    if threads < 2 || work.len() < 2 {
        return vec![f(work)];
    }
    let run = work.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let workers: Vec<_> = work.chunks(run).map(|run| scope.spawn(|| f(run))).collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}

/// The cores this process may use, learned once: the standard library reads the cgroup's
/// CPU quota from files each time it is asked.
pub fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Threads for `items` pieces of work: every core from `apart_from` pieces on, else one
/// (below it, starting threads costs more than it saves).
pub fn threads_for(items: usize, apart_from: usize) -> usize {
    if items >= apart_from { cores() } else { 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_cover_the_work_in_order() {
        let work: Vec<u32> = (0..10).collect();
        for threads in [0, 1, 2, 3, 4, 16] {
            let runs = in_runs(&work, threads, |run| run.to_vec());
            assert!(runs.len() <= threads.max(1), "{threads}");
            assert_eq!(runs.concat(), work, "{threads} threads");
        }
        assert_eq!(in_runs(&[] as &[u32], 4, |run| run.len()), vec![0]);
    }
}
