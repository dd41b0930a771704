//! pfanout: the shared front door (`mpt_cli::tool::main`) over the pfanout library.

fn main() {
    mpt_cli::tool::main::<pfanout::session::Session>()
}
