//! mproute: the shared front door (`mpt_cli::tool::main`) over the mproute library.

fn main() {
    mpt_cli::docs::handle_tool::<mproute::Cli>(&mproute::docs::MANUAL);
    mpt_cli::tool::main::<mproute::session::Session>()
}
