/// mimalloc: loading a cloud of tens of thousands of providers makes millions of small
/// allocations, which it serves faster than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc.h (v3, as libmimalloc-sys 0.1.49 builds it), which
/// the crate names no constant for; the test below checks it is that option.
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

fn main() -> std::process::ExitCode {
    kubeplace::cli::main(kubeplace::cli::Process {
        before_the_operator: give_freed_memory_back_at_once,
    })
}

/// Memory freed is given back to the system at once, not after mimalloc's delay: the
/// operator frees hundreds of MiB after a pass over a large cloud (the writes it queued) and
/// then mostly waits, and a delayed purge waits for allocations that do not come. The
/// commands that read a cloud and exit keep the delay: giving memory back while loading
/// costs them a tenth or more of their time.
fn give_freed_memory_back_at_once() {
    // SAFETY: setting an option takes two integers and is thread-safe.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
}

#[cfg(test)]
mod tests {
    /// The option set in `main` is mimalloc's purge delay: its default (1000 ms in this
    /// build, `MIMALLOC_PURGE_DELAY` when set) is what the option reads before it is set.
    #[test]
    fn the_option_set_is_the_purge_delay() {
        let expected = std::env::var("MIMALLOC_PURGE_DELAY")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1000);
        // SAFETY: reading an option takes an integer and is thread-safe.
        let delay = unsafe { libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY) };
        assert_eq!(delay, expected);
        // The option after it, use_numa_nodes, reads 0 unless set.
        let numa = unsafe { libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY + 1) };
        assert_eq!(numa, 0, "use_numa_nodes follows purge_delay");
        // What the operator's start sets (in this test, so as not to race the reads above).
        super::give_freed_memory_back_at_once();
        let delay = unsafe { libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY) };
        assert_eq!(delay, 0);
    }
}
