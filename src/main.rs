fn main() {
    std::process::exit(unwindlab::cli::main());
}
