//! The compiled BPF object's BTF must describe exactly the layouts of the Rust
//! mirrors in `mpt_bpf::abi`.
//!
//! The BTF is what clang made of `bpf/include/mpt/state_abi.h`, so this test
//! FAILS IF SOMEONE CHANGES A FIELD IN THE HEADER BUT NOT IN RUST (or the other
//! way round): struct size, member count, member names, byte offsets and
//! sizes are all compared. It also checks the map definitions (type, key and
//! value size, max_entries, flags) of the object. Needs no root: nothing is
//! loaded into the kernel.

use std::ffi::OsStr;
use std::mem::{offset_of, size_of};

use libbpf_rs::btf::types::{MemberAttr, Struct};
use libbpf_rs::{AsRawLibbpf, Btf, HasSize, MapType, ObjectBuilder};
use mpt_bpf::abi::{self, MptMeta, MptRouteKey, MptRouteVal};
use mpt_bpf::skel::STATE_OBJ;

/// One struct member as seen from either side: (name, byte offset, byte size).
type Member = (String, usize, usize);

/// Expected layout of a Rust type: (`size_of`, members in declaration order).
macro_rules! rust_layout {
    ($ty:ty { $($field:ident),+ $(,)? }) => {{
        fn field_size<S, F>(_: fn(&S) -> &F) -> usize {
            size_of::<F>()
        }
        (
            size_of::<$ty>(),
            vec![$((
                stringify!($field).to_string(),
                offset_of!($ty, $field),
                field_size(|s: &$ty| &s.$field),
            )),+],
        )
    }};
}

fn open_btf() -> Btf<'static> {
    Btf::from_raw("state", STATE_OBJ)
        .expect("libbpf could not parse the state BPF object")
        .expect("the state BPF object has no BTF (was it compiled with -g?)")
}

/// The BTF layout of `struct <name>`: (size, members).
fn btf_layout(btf: &Btf<'_>, name: &str) -> (usize, Vec<Member>) {
    // Look the struct up by kind: `mpt_meta` is also the name of a map
    // variable, so a plain lookup by name could find the VAR instead.
    let s: Struct<'_> = btf
        .type_by_kind::<Struct<'_>>()
        .find(|s| s.name() == Some(OsStr::new(name)))
        .unwrap_or_else(|| panic!("struct {name} not found in the object's BTF"));
    let raw = btf.as_libbpf_object().as_ptr();
    let members = (0..s.len())
        .map(|i| {
            let m = s
                .get(i)
                .unwrap_or_else(|| panic!("{name}: member {i} missing"));
            let mname = m
                .name
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| panic!("{name}: anonymous member {i} (not allowed in the ABI)"));
            let bit_off = match m.attr {
                MemberAttr::Normal { offset } => offset,
                MemberAttr::BitField { .. } => {
                    panic!("{name}.{mname}: bitfields are not allowed in the ABI")
                }
            };
            assert_eq!(bit_off % 8, 0, "{name}.{mname}: member not byte aligned");
            // SAFETY: `raw` is the valid btf pointer owned by `btf`, which
            // outlives this call; the type id comes from that same BTF.
            let sz = unsafe { libbpf_rs::libbpf_sys::btf__resolve_size(raw, m.ty.into()) };
            assert!(sz > 0, "{name}.{mname}: cannot resolve member size ({sz})");
            (mname, (bit_off / 8) as usize, sz as usize)
        })
        .collect();
    (s.size(), members)
}

fn check(btf: &Btf<'_>, c_name: &str, rust: (usize, Vec<Member>)) {
    let (btf_size, btf_members) = btf_layout(btf, c_name);
    let (rust_size, rust_members) = rust;
    assert_eq!(
        btf_size, rust_size,
        "sizeof(struct {c_name}) in the BPF object (from state_abi.h) != size_of the Rust mirror \
         in crates/bpf/src/abi.rs: update both sides and bump MPT_ABI_VERSION / ABI_VERSION"
    );
    assert_eq!(
        btf_members, rust_members,
        "struct {c_name}: members (name, byte offset, byte size) differ between state_abi.h \
         (left, from BTF) and crates/bpf/src/abi.rs (right): update both sides and bump \
         MPT_ABI_VERSION / ABI_VERSION"
    );
}

#[test]
fn mpt_meta_matches_btf() {
    let btf = open_btf();
    check(
        &btf,
        "mpt_meta",
        rust_layout!(MptMeta {
            abi_version,
            hash_seed,
            netns_cookie,
            flags,
            reserved
        }),
    );
    // abi_version must stay the first field forever.
    assert_eq!(
        btf_layout(&btf, "mpt_meta").1[0],
        ("abi_version".to_string(), 0, 4)
    );
}

#[test]
fn mpt_route_key_matches_btf() {
    let btf = open_btf();
    check(
        &btf,
        "mpt_route_key",
        rust_layout!(MptRouteKey {
            family,
            dst_len,
            reserved,
            table,
            metric,
            dst_be
        }),
    );
}

#[test]
fn mpt_route_val_matches_btf() {
    let btf = open_btf();
    check(
        &btf,
        "mpt_route_val",
        rust_layout!(MptRouteVal {
            algo,
            flags,
            nh_count,
            reserved,
            nh_group
        }),
    );
}

#[test]
fn map_definitions_match_abi() {
    let obj = ObjectBuilder::default()
        .open_memory(STATE_OBJ)
        .expect("libbpf could not open the state BPF object");
    let maps: Vec<_> = obj.maps().collect();
    let names: Vec<_> = maps
        .iter()
        .map(|m| m.name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "unexpected maps in state.bpf.o: {names:?}");

    let meta = maps
        .iter()
        .find(|m| m.name() == "mpt_meta")
        .expect("map mpt_meta missing");
    assert_eq!(meta.map_type(), MapType::Array);
    assert_eq!(meta.key_size() as usize, size_of::<u32>());
    assert_eq!(meta.value_size() as usize, MptMeta::SIZE);
    assert_eq!(meta.max_entries(), 1);

    let routes = maps
        .iter()
        .find(|m| m.name() == "mpt_routes")
        .expect("map mpt_routes missing");
    assert_eq!(routes.map_type(), MapType::Hash);
    assert_eq!(routes.key_size() as usize, MptRouteKey::SIZE);
    assert_eq!(routes.value_size() as usize, MptRouteVal::SIZE);
    assert_eq!(routes.max_entries(), abi::MAX_ROUTES);
    assert_eq!(
        routes.map_flags(),
        libbpf_rs::libbpf_sys::BPF_F_NO_PREALLOC,
        "mpt_routes must be BPF_F_NO_PREALLOC"
    );

    let progs: Vec<_> = obj
        .progs()
        .map(|p| p.name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(progs, ["mpt_anchor"]);
}

/// `#define NAME <integer>` values of state_abi.h (the preprocessor constants
/// are not in BTF, so read the header text itself).
fn header_define(name: &str) -> u64 {
    const HEADER: &str = include_str!("../../../bpf/include/mpt/state_abi.h");
    let value = HEADER
        .lines()
        .filter_map(|l| l.trim().strip_prefix("#define "))
        .find_map(|l| {
            let (n, v) = l.split_once(char::is_whitespace)?;
            (n == name).then(|| v.trim().to_string())
        })
        .unwrap_or_else(|| panic!("#define {name} not found in state_abi.h"));
    if let Some(shift) = value
        .strip_prefix("(1 << ")
        .and_then(|v| v.strip_suffix(')'))
    {
        return 1u64 << shift.parse::<u32>().expect("shift amount");
    }
    value
        .parse()
        .unwrap_or_else(|_| panic!("#define {name} {value}: not an integer"))
}

#[test]
fn header_constants_match_rust() {
    assert_eq!(
        header_define("MPT_ABI_VERSION"),
        u64::from(abi::ABI_VERSION)
    );
    assert_eq!(header_define("MPT_MAX_ROUTES"), u64::from(abi::MAX_ROUTES));
    for (name, v) in [
        ("MPT_ALGO_L3_HASH", abi::ALGO_L3_HASH),
        ("MPT_ALGO_PER_PACKET", abi::ALGO_PER_PACKET),
        ("MPT_ALGO_DRR", abi::ALGO_DRR),
        ("MPT_ALGO_RANDOM", abi::ALGO_RANDOM),
        ("MPT_ALGO_WRANDOM", abi::ALGO_WRANDOM),
        ("MPT_ALGO_L4_HASH", abi::ALGO_L4_HASH),
    ] {
        assert_eq!(header_define(name), u64::from(v), "{name}");
    }
}
