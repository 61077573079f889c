// mimalloc: validate allocates and frees millions of small results; glibc's
// malloc spent ~15 % of a validate run in malloc/free/consolidate.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(unwindlab::cli::main());
}
