//! The two-namespace link the pfanout root tests share (`#[path]`-included by
//! `pfanout_netns.rs` and `pfanout_tap.rs`): a sender `tx` and a receiver `rx` joined by a
//! veth pair (`pt` in tx, `pr` in rx), IPv6 off on both so that nothing but the test's frames
//! crosses it.

use mpt_testkit::{require_root, veth, Netns, Tool};

pub const PF: Tool = Tool::new(env!("CARGO_BIN_EXE_pfanout"));
/// A destination MAC nobody has: the receiver's stack drops such frames at once.
pub const FOREIGN_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x99];
pub const TX_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];

pub struct Link {
    pub tx: Netns,
    pub rx: Netns,
}

pub fn link(tag: &str) -> Link {
    require_root();
    let tx = Netns::new(&format!("{tag}t"));
    let rx = Netns::new(&format!("{tag}r"));
    for ns in [&tx, &rx] {
        ns.try_sysctl(&[
            ("net.ipv6.conf.all.disable_ipv6", "1"),
            ("net.ipv6.conf.default.disable_ipv6", "1"),
        ])
        .expect("sysctl");
    }
    veth(&tx, "pt", &rx, "pr");
    Link { tx, rx }
}
