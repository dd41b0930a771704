//! libbpf's own messages: to standard error with `-v` (verifier logs included), nowhere
//! otherwise. Operators get one sentence from our error instead.

/// Route libbpf's messages (see the module doc).
pub fn set_verbose(verbose: bool) {
    fn eprint(_: libbpf_rs::PrintLevel, msg: String) {
        eprint!("{msg}");
    }
    if verbose {
        libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Debug, eprint)));
    } else {
        libbpf_rs::set_print(None);
    }
}
