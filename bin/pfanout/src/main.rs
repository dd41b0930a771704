//! pfanout: the shared front door (`mpt_cli::tool::main`) over the pfanout library.

fn main() {
    mpt_cli::docs::handle_tool::<pfanout::Cli>(&pfanout::docs::MANUAL);
    mpt_cli::tool::main::<pfanout::session::Session>()
}
