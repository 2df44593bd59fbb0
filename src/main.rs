/// mimalloc: loading a cloud of tens of thousands of providers makes millions of small
/// allocations, which it serves faster than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    kubeplace::cli::main()
}
