//! Per-route multipath algorithms, numbered as `RT_MP_ALG_*` of the 2015 per-route patch.

use std::fmt;
use std::str::FromStr;

/// A per-route multipath algorithm. The numeric values are the wire values of `RTA_MP_ALGO`
/// (attribute 14, u32) and of our BPF state (`MPT_ALGO_*` in `bpf/include/mpt/state_abi.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub enum Algo {
    /// Hash of source and destination address (the default).
    #[default]
    L3Hash,
    /// Weighted round robin, lock-less per-CPU counters.
    PerPacket,
    /// Deficit round robin by bytes.
    Drr,
    /// Uniform random, ignores weights.
    Random,
    /// Weighted random.
    WRandom,
    /// Hash of addresses, protocol and ports.
    L4Hash,
}

impl Algo {
    /// Every algorithm, in numeric order.
    pub const ALL: [Algo; 6] = [
        Algo::L3Hash,
        Algo::PerPacket,
        Algo::Drr,
        Algo::Random,
        Algo::WRandom,
        Algo::L4Hash,
    ];

    /// The `RT_MP_ALG_*` value.
    pub const fn as_u32(self) -> u32 {
        match self {
            Algo::L3Hash => 0,
            Algo::PerPacket => 1,
            Algo::Drr => 2,
            Algo::Random => 3,
            Algo::WRandom => 4,
            Algo::L4Hash => 5,
        }
    }

    /// Inverse of [`Algo::as_u32`]; `None` for values no version of ours defines.
    pub const fn from_u32(v: u32) -> Option<Algo> {
        Some(match v {
            0 => Algo::L3Hash,
            1 => Algo::PerPacket,
            2 => Algo::Drr,
            3 => Algo::Random,
            4 => Algo::WRandom,
            5 => Algo::L4Hash,
            _ => return None,
        })
    }

    /// The keyword used on the command line and in JSON.
    pub const fn name(self) -> &'static str {
        match self {
            Algo::L3Hash => "l3-hash",
            Algo::PerPacket => "per-packet",
            Algo::Drr => "drr",
            Algo::Random => "random",
            Algo::WRandom => "wrandom",
            Algo::L4Hash => "l4-hash",
        }
    }

    /// Whether the algorithm takes nexthop weights into account.
    pub const fn honours_weights(self) -> bool {
        !matches!(self, Algo::Random)
    }
}

impl fmt::Display for Algo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Error for an algorithm keyword we do not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown algorithm \"{0}\" (expected one of: l3-hash, l4-hash, per-packet, drr, random, wrandom)")]
pub struct UnknownAlgo(pub String);

impl FromStr for Algo {
    type Err = UnknownAlgo;
    /// Exact keywords only: iproute2-style prefix matching is deliberately not supported.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Algo::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| UnknownAlgo(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbering_matches_rt_mp_alg() {
        let want = [
            ("l3-hash", 0),
            ("per-packet", 1),
            ("drr", 2),
            ("random", 3),
            ("wrandom", 4),
            ("l4-hash", 5),
        ];
        for (name, v) in want {
            let a: Algo = name.parse().expect("known algo");
            assert_eq!(a.as_u32(), v);
            assert_eq!(Algo::from_u32(v), Some(a));
            assert_eq!(a.to_string(), name);
        }
        assert_eq!(Algo::from_u32(6), None);
    }

    #[test]
    fn no_prefix_matching() {
        assert!("l4".parse::<Algo>().is_err());
        assert!("L4-HASH".parse::<Algo>().is_err());
        assert!("".parse::<Algo>().is_err());
    }
}
