fn main() -> std::process::ExitCode {
    kubeplace::cli::main()
}
