//! Rust mirrors of the structs in `bpf/include/mpt/state_abi.h`.
//!
//! That header is the single definition of the BPF <-> user-space ABI; the
//! types here must match it byte for byte. Three independent checks keep them
//! in sync:
//!
//! * the `const` asserts below (sizes, offsets, no padding) and a comparison
//!   with the types libbpf-cargo generated from the object's BTF
//!   ([`crate::skel::state::types`]) — a mismatch fails compilation;
//! * `tests/abi_btf.rs`, which reads the compiled object's BTF at test time;
//! * the `_Static_assert`s in the header (BPF and host C compilers).
//!
//! Any layout change must bump [`ABI_VERSION`] (`MPT_ABI_VERSION`).
//!
//! All multi-byte integers are in host byte order except
//! [`MptRouteKey::dst_be`], which is an address in network byte order.

use core::mem::{offset_of, size_of};

use crate::skel::state::types as btf;

/// `MPT_ABI_VERSION`: layout version of every struct in this module.
pub const ABI_VERSION: u32 = 1;
/// `MPT_MAX_ROUTES`: `max_entries` of the `mpt_routes` map.
pub const MAX_ROUTES: u32 = 1 << 20;

/// `MPT_ALGO_L3_HASH`.
pub const ALGO_L3_HASH: u8 = 0;
/// `MPT_ALGO_PER_PACKET`.
pub const ALGO_PER_PACKET: u8 = 1;
/// `MPT_ALGO_DRR`.
pub const ALGO_DRR: u8 = 2;
/// `MPT_ALGO_RANDOM`.
pub const ALGO_RANDOM: u8 = 3;
/// `MPT_ALGO_WRANDOM`.
pub const ALGO_WRANDOM: u8 = 4;
/// `MPT_ALGO_L4_HASH`.
pub const ALGO_L4_HASH: u8 = 5;

/// `AF_INET`, the value of [`MptRouteKey::family`] for IPv4.
pub const AF_INET: u8 = 2;
/// `AF_INET6`, the value of [`MptRouteKey::family`] for IPv6.
pub const AF_INET6: u8 = 10;

/// `struct mpt_meta`: the single value (key 0) of the `mpt_meta` array map.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MptMeta {
    /// `MPT_ABI_VERSION` of the writer. Must stay the first field forever.
    pub abi_version: u32,
    /// Seed for the hash based algorithms.
    pub hash_seed: u32,
    /// Cookie of the owning network namespace.
    pub netns_cookie: u64,
    /// Reserved for flags; 0 for now.
    pub flags: u32,
    /// Must be 0.
    pub reserved: u32,
}

/// `struct mpt_route_key`: key of the `mpt_routes` hash map.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MptRouteKey {
    /// [`AF_INET`] or [`AF_INET6`].
    pub family: u8,
    /// Prefix length.
    pub dst_len: u8,
    /// Must be 0 (it is part of the hashed key).
    pub reserved: u16,
    /// Routing table id (host byte order).
    pub table: u32,
    /// Route metric / priority (host byte order).
    pub metric: u32,
    /// Prefix address in network byte order; IPv4 uses the first 4 bytes,
    /// the rest are zero.
    pub dst_be: [u8; 16],
}

/// `struct mpt_route_val`: value of the `mpt_routes` hash map.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MptRouteVal {
    /// One of the `ALGO_*` constants.
    pub algo: u8,
    /// Reserved for flags; 0 for now.
    pub flags: u8,
    /// Number of nexthops in the group.
    pub nh_count: u8,
    /// Must be 0.
    pub reserved: u8,
    /// Kernel nexthop group id.
    pub nh_group: u32,
}

// ---- layout checks (compile time) -----------------------------------------

/// Asserts size, every field offset and field size against the expected
/// numbers from `state_abi.h`, plus "no padding" (the field sizes add up to
/// the struct size, which makes `as_bytes` sound), and compares with the
/// BTF-generated type of the same name.
macro_rules! assert_layout {
    ($ty:ty, $btf:ty, $size:expr, { $($field:ident: $fty:ty = $off:expr),+ $(,)? }) => {
        const _: () = {
            assert!(size_of::<$ty>() == $size);
            assert!(size_of::<$btf>() == $size);
            $(
                assert!(offset_of!($ty, $field) == $off);
                assert!(offset_of!($btf, $field) == $off);
                assert!(size_of::<$fty>() == size_of_field(|s: &$ty| &s.$field));
            )+
            assert!(0 $(+ size_of::<$fty>())+ == $size);
        };
    };
}

/// Size of a field, given a projection (lets the macro check declared types).
const fn size_of_field<S, F>(_: fn(&S) -> &F) -> usize {
    size_of::<F>()
}

assert_layout!(MptMeta, btf::mpt_meta, 24, {
    abi_version: u32 = 0,
    hash_seed: u32 = 4,
    netns_cookie: u64 = 8,
    flags: u32 = 16,
    reserved: u32 = 20,
});
assert_layout!(MptRouteKey, btf::mpt_route_key, 28, {
    family: u8 = 0,
    dst_len: u8 = 1,
    reserved: u16 = 2,
    table: u32 = 4,
    metric: u32 = 8,
    dst_be: [u8; 16] = 12,
});
assert_layout!(MptRouteVal, btf::mpt_route_val, 8, {
    algo: u8 = 0,
    flags: u8 = 1,
    nh_count: u8 = 2,
    reserved: u8 = 3,
    nh_group: u32 = 4,
});

// The algorithm numbers are also the wire values of mpt_model::Algo.
const _: () = {
    use mpt_model::Algo;
    assert!(Algo::L3Hash.as_u32() == ALGO_L3_HASH as u32);
    assert!(Algo::PerPacket.as_u32() == ALGO_PER_PACKET as u32);
    assert!(Algo::Drr.as_u32() == ALGO_DRR as u32);
    assert!(Algo::Random.as_u32() == ALGO_RANDOM as u32);
    assert!(Algo::WRandom.as_u32() == ALGO_WRANDOM as u32);
    assert!(Algo::L4Hash.as_u32() == ALGO_L4_HASH as u32);
};

// ---- byte conversion --------------------------------------------------------

/// `N` bytes at `off`, or `None` if out of range.
fn field<const N: usize>(b: &[u8], off: usize) -> Option<[u8; N]> {
    b.get(off..off.checked_add(N)?)?.try_into().ok()
}

/// Implements `SIZE`, `as_bytes` and `from_bytes` for a padding-free
/// `#[repr(C)]` struct whose fields are integers or byte arrays.
macro_rules! impl_bytes {
    ($ty:ident { $($field:ident: $kind:tt),+ $(,)? }) => {
        impl $ty {
            /// Size in bytes (the BPF map key/value size).
            pub const SIZE: usize = size_of::<$ty>();

            /// The in-memory (native endian) representation, as BPF sees it.
            pub fn as_bytes(&self) -> &[u8] {
                // SAFETY: `Self` is `#[repr(C)]`, consists only of integer and
                // byte-array fields and has no padding (checked by
                // `assert_layout!`), so all `SIZE` bytes are initialised and
                // any alignment is fine for `u8`. The slice borrows `self`.
                unsafe { core::slice::from_raw_parts((self as *const Self).cast::<u8>(), Self::SIZE) }
            }

            /// Parses the native-endian representation; `None` unless
            /// `bytes.len() == SIZE`.
            pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
                if bytes.len() != Self::SIZE {
                    return None;
                }
                Some(Self {
                    $($field: impl_bytes!(@read $kind, bytes, offset_of!($ty, $field)),)+
                })
            }
        }
    };
    (@read bytes, $b:expr, $off:expr) => { field($b, $off)? };
    (@read $int:ty, $b:expr, $off:expr) => { <$int>::from_ne_bytes(field($b, $off)?) };
}

impl_bytes!(MptMeta {
    abi_version: u32,
    hash_seed: u32,
    netns_cookie: u64,
    flags: u32,
    reserved: u32,
});
impl_bytes!(MptRouteKey {
    family: u8,
    dst_len: u8,
    reserved: u16,
    table: u32,
    metric: u32,
    dst_be: bytes,
});
impl_bytes!(MptRouteVal {
    algo: u8,
    flags: u8,
    nh_count: u8,
    reserved: u8,
    nh_group: u32,
});

impl MptMeta {
    /// Metadata for the current ABI, with `flags` and `reserved` zero.
    pub const fn new(hash_seed: u32, netns_cookie: u64) -> Self {
        Self {
            abi_version: ABI_VERSION,
            hash_seed,
            netns_cookie,
            flags: 0,
            reserved: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> MptMeta {
        MptMeta {
            abi_version: ABI_VERSION,
            hash_seed: 0xdead_beef,
            netns_cookie: 0x0102_0304_0506_0708,
            flags: 0x11,
            reserved: 0x2233_4455,
        }
    }

    fn key() -> MptRouteKey {
        let mut dst_be = [0u8; 16];
        dst_be[..4].copy_from_slice(&[192, 0, 2, 0]);
        MptRouteKey {
            family: AF_INET,
            dst_len: 24,
            reserved: 0xa55a,
            table: 254,
            metric: 1024,
            dst_be,
        }
    }

    fn val() -> MptRouteVal {
        MptRouteVal {
            algo: ALGO_WRANDOM,
            flags: 0x80,
            nh_count: 3,
            reserved: 7,
            nh_group: 0x1234_5678,
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(MptMeta::SIZE, 24);
        assert_eq!(MptRouteKey::SIZE, 28);
        assert_eq!(MptRouteVal::SIZE, 8);
        assert_eq!(meta().as_bytes().len(), 24);
        assert_eq!(key().as_bytes().len(), 28);
        assert_eq!(val().as_bytes().len(), 8);
    }

    #[test]
    fn round_trips() {
        let m = meta();
        assert_eq!(MptMeta::from_bytes(m.as_bytes()), Some(m));
        let k = key();
        assert_eq!(MptRouteKey::from_bytes(k.as_bytes()), Some(k));
        let v = val();
        assert_eq!(MptRouteVal::from_bytes(v.as_bytes()), Some(v));
        let d = MptRouteKey::default();
        assert_eq!(MptRouteKey::from_bytes(d.as_bytes()), Some(d));
    }

    #[test]
    fn byte_layout_is_native_endian_c_layout() {
        let m = meta().as_bytes().to_vec();
        assert_eq!(m[0..4], ABI_VERSION.to_ne_bytes());
        assert_eq!(m[4..8], 0xdead_beef_u32.to_ne_bytes());
        assert_eq!(m[8..16], 0x0102_0304_0506_0708_u64.to_ne_bytes());
        assert_eq!(m[16..20], 0x11_u32.to_ne_bytes());
        assert_eq!(m[20..24], 0x2233_4455_u32.to_ne_bytes());

        let k = key().as_bytes().to_vec();
        assert_eq!(k[0], AF_INET);
        assert_eq!(k[1], 24);
        assert_eq!(k[2..4], 0xa55a_u16.to_ne_bytes());
        assert_eq!(k[4..8], 254_u32.to_ne_bytes());
        assert_eq!(k[8..12], 1024_u32.to_ne_bytes());
        assert_eq!(k[12..16], [192, 0, 2, 0]);
        assert!(k[16..28].iter().all(|&b| b == 0));

        let v = val().as_bytes().to_vec();
        assert_eq!(v[..4], [ALGO_WRANDOM, 0x80, 3, 7]);
        assert_eq!(v[4..8], 0x1234_5678_u32.to_ne_bytes());
    }

    #[test]
    fn from_bytes_rejects_wrong_lengths() {
        let m = meta();
        let b = m.as_bytes();
        assert_eq!(MptMeta::from_bytes(&b[..23]), None);
        let mut long = b.to_vec();
        long.push(0);
        assert_eq!(MptMeta::from_bytes(&long), None);
        assert_eq!(MptMeta::from_bytes(&[]), None);
        assert_eq!(MptRouteKey::from_bytes(&[0u8; 27]), None);
        assert_eq!(MptRouteKey::from_bytes(&[0u8; 29]), None);
        assert_eq!(MptRouteVal::from_bytes(&[0u8; 7]), None);
        assert_eq!(MptRouteVal::from_bytes(&[0u8; 16]), None);
        assert_eq!(
            MptRouteVal::from_bytes(&[0u8; 8]),
            Some(MptRouteVal::default())
        );
    }

    #[test]
    fn meta_new_uses_current_abi() {
        let m = MptMeta::new(7, 9);
        assert_eq!(m.abi_version, ABI_VERSION);
        assert_eq!(
            (m.hash_seed, m.netns_cookie, m.flags, m.reserved),
            (7, 9, 0, 0)
        );
        // abi_version is readable from the first 4 bytes of any mpt_meta.
        assert_eq!(m.as_bytes()[..4], ABI_VERSION.to_ne_bytes());
    }
}
