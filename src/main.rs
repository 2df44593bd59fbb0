fn main() {
    print!("{}", kubeplace::cli::crds::render().unwrap());
}
