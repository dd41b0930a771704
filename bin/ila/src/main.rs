//! ila: the shared front door (`mpt_cli::tool::main`) over the ila library.

fn main() {
    mpt_cli::docs::handle_tool::<ila::Cli>(&ila::docs::MANUAL);
    mpt_cli::tool::main::<ila::session::Session>()
}
