//! Work cut into runs, one run a thread: how a large manifest is read and a large answer
//! written on every core, with what each run gives kept in order.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

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

/// `f` over `work` cut into runs of `run_len` items, on `threads` threads, with what each run
/// gives handed to `each` on the caller's thread, in order, as soon as it and every run
/// before it are done: the caller works on the first runs while later ones are computed,
/// and computes runs itself whenever the next one to hand over is not done.
/// When `each` breaks, runs not yet started are not started, and nothing more is handed
/// over. Returns how many runs were handed over. A panic in a run is raised again here.
pub fn in_runs_streamed<W: Sync, T: Send>(
    work: &[W],
    run_len: usize,
    threads: usize,
    f: impl Fn(&[W]) -> T + Sync,
    mut each: impl FnMut(T) -> ControlFlow<()>,
) -> usize {
    let runs: Vec<&[W]> = work.chunks(run_len.max(1)).collect();
    if threads < 1 || runs.len() < 2 {
        let mut handed = 0;
        for run in runs {
            handed += 1;
            if each(f(run)).is_break() {
                break;
            }
        }
        return handed;
    }
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (done, finished) = std::sync::mpsc::channel::<(usize, T)>();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.min(runs.len()))
            .map(|_| {
                let done = done.clone();
                let (runs, next, stop, f) = (&runs, &next, &stop, &f);
                scope.spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(run) = runs.get(i) else { break };
                        if done.send((i, f(run))).is_err() {
                            break;
                        }
                    }
                })
            })
            .collect();
        // Only the workers' senders remain: the loop below ends when the last one is done.
        drop(done);
        let mut waiting = std::collections::BTreeMap::new();
        let mut handed = 0;
        'receive: loop {
            while let Some(given) = waiting.remove(&handed) {
                handed += 1;
                if each(given).is_break() {
                    stop.store(true, Ordering::Relaxed);
                    break 'receive;
                }
            }
            if handed == runs.len() {
                break;
            }
            let (i, given) = match finished.try_recv() {
                Ok(done) => done,
                // The next run to hand over is not done yet: rather than wait for it, the
                // caller computes a run nobody has started, so that with few cores its
                // thread shares the runs with the workers whenever `each` is the lighter.
                Err(_) => {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    match runs.get(i) {
                        Some(run) => (i, f(run)),
                        None => match finished.recv() {
                            Ok(done) => done,
                            // Every worker is gone: one panicked, raised below.
                            Err(_) => break,
                        },
                    }
                }
            };
            waiting.insert(i, given);
        }
        // A worker may still be sending: without a receiver its send fails and it stops.
        drop(finished);
        for worker in workers {
            if let Err(panic) = worker.join() {
                std::panic::resume_unwind(panic);
            }
        }
        handed
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

    #[test]
    fn streamed_runs_arrive_in_order_whatever_finishes_first() {
        let work: Vec<u64> = (0..50).collect();
        for threads in [0, 1, 2, 3, 8] {
            for run_len in [1, 3, 50, 100] {
                let mut seen = Vec::new();
                // Earlier runs sleep longer, so later ones finish first on other threads.
                let handed = in_runs_streamed(
                    &work,
                    run_len,
                    threads,
                    |run| {
                        std::thread::sleep(std::time::Duration::from_micros(50 - run[0]));
                        run.to_vec()
                    },
                    |run| {
                        seen.extend(run);
                        ControlFlow::Continue(())
                    },
                );
                assert_eq!(seen, work, "{threads} threads, runs of {run_len}");
                assert_eq!(handed, work.len().div_ceil(run_len), "{threads}/{run_len}");
            }
        }
    }

    #[test]
    fn a_break_stops_the_runs_and_the_handing_over() {
        let work: Vec<u32> = (0..1_000).collect();
        for threads in [1, 2, 4] {
            let started = AtomicUsize::new(0);
            // On the workers, runs from the sixth on wait until the caller has broken off, so
            // that they cannot finish every run before the break is seen (the caller, which
            // computes runs too, never waits for itself).
            let broken = AtomicBool::new(false);
            let caller = std::thread::current().id();
            let mut seen = Vec::new();
            let handed = in_runs_streamed(
                &work,
                10,
                threads,
                |run| {
                    started.fetch_add(1, Ordering::Relaxed);
                    while run[0] >= 50
                        && !broken.load(Ordering::Relaxed)
                        && std::thread::current().id() != caller
                    {
                        std::thread::yield_now();
                    }
                    run.to_vec()
                },
                |run| {
                    seen.extend(run);
                    if seen.len() >= 30 {
                        broken.store(true, Ordering::Relaxed);
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                },
            );
            assert_eq!(handed, 3, "{threads} threads");
            assert_eq!(seen, (0..30).collect::<Vec<_>>(), "{threads} threads");
            // The workers stop soon after: far from all 100 runs are computed.
            assert!(started.load(Ordering::Relaxed) < 50, "{threads} threads");
        }
        let mut calls = 0;
        assert_eq!(
            in_runs_streamed(
                &[] as &[u32],
                4,
                2,
                |r| r.len(),
                |_| {
                    calls += 1;
                    ControlFlow::Continue(())
                }
            ),
            0
        );
        assert_eq!(calls, 0);
    }

    #[test]
    fn the_caller_computes_runs_while_the_next_one_is_not_done() {
        let work: Vec<u32> = (0..100).collect();
        let caller = std::thread::current().id();
        let by_caller = AtomicUsize::new(0);
        let mut seen = Vec::new();
        // The one worker's run waits until the caller has computed three (at most 10 s).
        let handed = in_runs_streamed(
            &work,
            10,
            1,
            |run| {
                if std::thread::current().id() == caller {
                    by_caller.fetch_add(1, Ordering::Relaxed);
                } else {
                    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
                    while by_caller.load(Ordering::Relaxed) < 3 && std::time::Instant::now() < until
                    {
                        std::thread::yield_now();
                    }
                }
                run.to_vec()
            },
            |run| {
                seen.extend(run);
                ControlFlow::Continue(())
            },
        );
        assert_eq!(seen, work);
        assert_eq!(handed, 10);
        assert!(by_caller.load(Ordering::Relaxed) >= 3);
    }

    #[test]
    #[should_panic(expected = "run 7")]
    fn a_panic_in_a_run_is_raised_to_the_caller() {
        let work: Vec<u32> = (0..20).collect();
        in_runs_streamed(
            &work,
            1,
            2,
            |run| {
                assert!(run[0] != 7, "run 7");
                run[0]
            },
            |_| ControlFlow::Continue(()),
        );
    }
}
