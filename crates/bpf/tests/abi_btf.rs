//! The compiled BPF objects' BTF must describe exactly the layouts of the Rust
//! mirrors in `mpt_bpf::mproute::abi` and `mpt_bpf::ila::abi`.
//!
//! The BTF is what clang made of `bpf/include/mpt/state_abi.h` and
//! `bpf/include/mpt/dp_abi.h` (the maps of `bpf/mproute/maps.bpf.h` use every ABI
//! struct, so the state object's BTF describes them all), so this test
//! FAILS IF SOMEONE CHANGES A FIELD IN THE HEADER BUT NOT IN RUST (or the other
//! way round): struct size, member count, member names, byte offsets and
//! sizes are all compared. It also checks the map definitions (type, key and
//! value size, max_entries, flags) of the object and the header constants.
//! Needs no root: nothing is loaded into the kernel.

use std::ffi::OsStr;
use std::mem::{offset_of, size_of};

use libbpf_rs::btf::types::{Array, MemberAttr, Struct};
use libbpf_rs::btf::BtfType;
use libbpf_rs::{AsRawLibbpf, Btf, HasSize, MapType, ObjectBuilder};
use mpt_bpf::mproute::abi::{
    self, MptCounter, MptDpRoute, MptGroup, MptLpm4Key, MptLpm6Key, MptMeta, MptNh, MptPcpuState,
    MptRouteKey, MptRouteStats, MptRouteVal, Reason,
};
use mpt_bpf::skel::mproute::STATE_OBJ;

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

fn btf_of(name: &'static str, obj: &'static [u8]) -> Btf<'static> {
    Btf::from_raw(name, obj)
        .unwrap_or_else(|e| panic!("libbpf could not parse the {name} BPF object: {e}"))
        .unwrap_or_else(|| panic!("the {name} BPF object has no BTF (was it compiled with -g?)"))
}

/// mproute's state object (`bpf/mproute/state.bpf.c`).
fn open_btf() -> Btf<'static> {
    btf_of("state", STATE_OBJ)
}

/// The ILA state object (`bpf/ila/ila_state.bpf.c`).
fn open_ila_btf() -> Btf<'static> {
    btf_of("ila_state", mpt_bpf::skel::ila::STATE_OBJ)
}

/// The BTF layout of `struct <name>`: (size, members).
fn btf_layout(btf: &Btf<'_>, name: &str) -> (usize, Vec<Member>) {
    let s = find_struct(btf, name);
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

/// `struct <name>` in the BTF (by kind: `mpt_meta` is also a map variable).
fn find_struct<'b>(btf: &'b Btf<'_>, name: &str) -> Struct<'b> {
    btf.type_by_kind::<Struct<'_>>()
        .find(|s| s.name() == Some(OsStr::new(name)))
        .unwrap_or_else(|| panic!("struct {name} not found in the object's BTF"))
}

/// A C-ish spelling of a BTF type, typedefs and modifiers skipped:
/// `struct mpt_nh[32]`, `unsigned char[16]`, `unsigned int`.
fn describe(ty: BtfType<'_>) -> String {
    let ty = ty.skip_mods_and_typedefs();
    if let Ok(a) = Array::try_from(ty) {
        return format!("{}[{}]", describe(a.contained_type()), a.capacity());
    }
    let name = ty
        .name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if Struct::try_from(ty).is_ok() {
        format!("struct {name}")
    } else {
        name
    }
}

/// The type of member `member` of `struct <name>`, spelled by [`describe`].
fn member_type(btf: &Btf<'_>, name: &str, member: &str) -> String {
    let s = find_struct(btf, name);
    let m = (0..s.len())
        .filter_map(|i| s.get(i))
        .find(|m| m.name == Some(OsStr::new(member)))
        .unwrap_or_else(|| panic!("{name}.{member} not found"));
    let ty = btf
        .type_by_id::<BtfType<'_>>(m.ty)
        .unwrap_or_else(|| panic!("{name}.{member}: type id not in the BTF"));
    describe(ty)
}

fn check(btf: &Btf<'_>, c_name: &str, rust: (usize, Vec<Member>)) {
    let (btf_size, btf_members) = btf_layout(btf, c_name);
    let (rust_size, rust_members) = rust;
    assert_eq!(
        btf_size, rust_size,
        "sizeof(struct {c_name}) in the BPF object (from the ABI header) != size_of the Rust mirror \
         in crates/bpf/src/<tool>/abi.rs: update both sides and bump the ABI version"
    );
    assert_eq!(
        btf_members, rust_members,
        "struct {c_name}: members (name, byte offset, byte size) differ between the ABI header \
         (left, from BTF) and crates/bpf/src/<tool>/abi.rs (right): update both sides and bump \
         the ABI version"
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
            fib4_gen
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
            protocol,
            nh_group,
            hash_fields,
            reserved,
            seed
        }),
    );
}

#[test]
fn mpt_lpm4_key_matches_btf() {
    let btf = open_btf();
    check(
        &btf,
        "mpt_lpm4_key",
        rust_layout!(MptLpm4Key {
            prefixlen,
            table_be,
            addr
        }),
    );
}

#[test]
fn mpt_lpm6_key_matches_btf() {
    let btf = open_btf();
    check(
        &btf,
        "mpt_lpm6_key",
        rust_layout!(MptLpm6Key {
            prefixlen,
            table_be,
            addr
        }),
    );
}

#[test]
fn mpt_dp_route_matches_btf() {
    let btf = open_btf();
    check(
        &btf,
        "mpt_dp_route",
        rust_layout!(MptDpRoute {
            id,
            algo,
            flags,
            stats_slot,
            group,
            hash_fields,
            reserved,
            seed
        }),
    );
}

#[test]
fn mpt_nh_matches_btf() {
    let btf = open_btf();
    check(
        &btf,
        "mpt_nh",
        rust_layout!(MptNh {
            ifindex,
            upper_bound,
            cum_weight,
            weight,
            flags,
            family,
            gw
        }),
    );
}

#[test]
fn mpt_group_matches_btf() {
    let btf = open_btf();
    check(
        &btf,
        "mpt_group",
        rust_layout!(MptGroup {
            nh_count,
            total_weight,
            nh
        }),
    );
}

#[test]
fn mpt_counter_matches_btf() {
    let btf = open_btf();
    check(
        &btf,
        "mpt_counter",
        rust_layout!(MptCounter { packets, bytes }),
    );
}

#[test]
fn mpt_route_stats_matches_btf() {
    let btf = open_btf();
    check(
        &btf,
        "mpt_route_stats",
        rust_layout!(MptRouteStats { route, nh }),
    );
}

#[test]
fn mpt_pcpu_state_matches_btf() {
    let btf = open_btf();
    check(
        &btf,
        "mpt_pcpu_state",
        rust_layout!(MptPcpuState {
            rr,
            drr_idx,
            drr_deficit
        }),
    );
}

/// Offsets and sizes alone would not notice e.g. `struct mpt_nh nh[32]`
/// turning into `__u8 nh[1024]`: the nested members must be the ABI structs
/// the Rust mirrors nest (whose own layouts the tests above check).
#[test]
fn nested_members_are_abi_structs() {
    let btf = open_btf();
    let n = abi::MAX_NH;
    for (s, m, want) in [
        ("mpt_dp_route", "id", "struct mpt_route_key".to_string()),
        ("mpt_group", "nh", format!("struct mpt_nh[{n}]")),
        ("mpt_route_stats", "route", "struct mpt_counter".to_string()),
        ("mpt_route_stats", "nh", format!("struct mpt_counter[{n}]")),
    ] {
        assert_eq!(member_type(&btf, s, m), want, "{s}.{m}");
    }
}

/// Expected definition of one map of `bpf/mproute/maps.bpf.h`.
struct MapDef {
    name: &'static str,
    ty: MapType,
    key_size: usize,
    value_size: usize,
    max_entries: u32,
    flags: u32,
}

#[test]
fn map_definitions_match_abi() {
    use libbpf_rs::libbpf_sys::BPF_F_NO_PREALLOC;

    let u32_size = size_of::<u32>();
    let expected = [
        MapDef {
            name: "mpt_meta",
            ty: MapType::Array,
            key_size: u32_size,
            value_size: MptMeta::SIZE,
            max_entries: 1,
            flags: 0,
        },
        MapDef {
            name: "mpt_routes_in",
            ty: MapType::Hash,
            key_size: MptRouteKey::SIZE,
            value_size: MptRouteVal::SIZE,
            max_entries: abi::ROUTES_START,
            flags: BPF_F_NO_PREALLOC,
        },
        // LPM tries must be BPF_F_NO_PREALLOC (the kernel refuses them otherwise).
        MapDef {
            name: "mpt_lpm4",
            ty: MapType::LpmTrie,
            key_size: MptLpm4Key::SIZE,
            value_size: MptDpRoute::SIZE,
            max_entries: abi::MAX_DP_ROUTES,
            flags: BPF_F_NO_PREALLOC,
        },
        MapDef {
            name: "mpt_lpm6",
            ty: MapType::LpmTrie,
            key_size: MptLpm6Key::SIZE,
            value_size: MptDpRoute::SIZE,
            max_entries: abi::MAX_DP_ROUTES,
            flags: BPF_F_NO_PREALLOC,
        },
        MapDef {
            name: "mpt_groups_in",
            ty: MapType::Hash,
            key_size: u32_size,
            value_size: MptGroup::SIZE,
            max_entries: abi::GROUPS_START,
            flags: BPF_F_NO_PREALLOC,
        },
        MapDef {
            name: "mpt_stats_in",
            ty: MapType::PercpuHash,
            key_size: MptRouteKey::SIZE,
            value_size: MptRouteStats::SIZE,
            max_entries: abi::ROUTES_START,
            flags: BPF_F_NO_PREALLOC,
        },
        MapDef {
            name: "mpt_res_in",
            ty: MapType::Hash,
            key_size: MptRouteKey::SIZE,
            value_size: abi::MptResTable::SIZE,
            max_entries: abi::RES_START,
            flags: BPF_F_NO_PREALLOC,
        },
        MapDef {
            name: "mpt_slot_stats",
            ty: MapType::PercpuArray,
            key_size: u32_size,
            value_size: MptRouteStats::SIZE,
            max_entries: abi::STATS_SLOTS,
            flags: 0,
        },
        MapDef {
            name: "mpt_pcpu_in",
            ty: MapType::PercpuHash,
            key_size: MptRouteKey::SIZE,
            value_size: MptPcpuState::SIZE,
            max_entries: abi::ROUTES_START,
            flags: BPF_F_NO_PREALLOC,
        },
        // Arrays cannot be BPF_F_NO_PREALLOC.
        MapDef {
            name: "mpt_reasons",
            ty: MapType::PercpuArray,
            key_size: u32_size,
            value_size: size_of::<u64>(),
            max_entries: abi::R_MAX,
            flags: 0,
        },
    ];

    check_maps(
        STATE_OBJ,
        "bpf/mproute/maps.bpf.h",
        &expected,
        &["mpt_anchor"],
    );
}

/// The maps of an object are exactly `expected`, and its programs `progs`.
fn check_maps(obj: &'static [u8], header: &str, expected: &[MapDef], progs: &[&str]) {
    // a growable map `X` (mpt/lib/grow.h): `X_in`, its first inner map, and `X`, an array of
    // one map
    let outers: Vec<MapDef> = expected
        .iter()
        .filter_map(|d| d.name.strip_suffix("_in"))
        .map(|name| MapDef {
            name,
            ty: MapType::ArrayOfMaps,
            key_size: size_of::<u32>(),
            value_size: size_of::<u32>(),
            max_entries: 1,
            flags: 0,
        })
        .collect();
    let expected: Vec<&MapDef> = expected.iter().chain(outers.iter()).collect();
    let obj = ObjectBuilder::default()
        .open_memory(obj)
        .expect("libbpf could not open the BPF object");
    let maps: Vec<_> = obj.maps().collect();
    let mut names: Vec<_> = maps
        .iter()
        .map(|m| m.name().to_string_lossy().into_owned())
        .collect();
    names.sort_unstable();
    let mut want: Vec<_> = expected.iter().map(|d| d.name.to_string()).collect();
    want.sort_unstable();
    assert_eq!(names, want, "maps of the state object (from {header})");

    for d in expected.iter().copied() {
        let m = maps
            .iter()
            .find(|m| m.name() == d.name)
            .unwrap_or_else(|| panic!("map {} missing", d.name));
        assert_eq!(m.map_type(), d.ty, "{}: map type", d.name);
        assert_eq!(m.key_size() as usize, d.key_size, "{}: key size", d.name);
        assert_eq!(
            m.value_size() as usize,
            d.value_size,
            "{}: value size",
            d.name
        );
        assert_eq!(m.max_entries(), d.max_entries, "{}: max_entries", d.name);
        assert_eq!(m.map_flags(), d.flags, "{}: map_flags", d.name);
    }

    let found: Vec<_> = obj
        .progs()
        .map(|p| p.name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(found, progs);
}

/// The ABI headers, for the constants that are not in BTF.
const HEADERS: [(&str, &str); 3] = [
    (
        "state_abi.h",
        include_str!("../../../bpf/include/mpt/state_abi.h"),
    ),
    (
        "dp_abi.h",
        include_str!("../../../bpf/include/mpt/dp_abi.h"),
    ),
    (
        "ila_abi.h",
        include_str!("../../../bpf/include/mpt/ila_abi.h"),
    ),
];

/// Parses an integer constant as written in the headers: decimal, `0x` hex
/// or `(1 << N)`, optionally followed by a `/* comment */`.
fn parse_c_int(name: &str, value: &str) -> u64 {
    let value = value.split("/*").next().unwrap_or(value).trim();
    if let Some(shift) = value
        .strip_prefix("(1 << ")
        .and_then(|v| v.strip_suffix(')'))
    {
        return 1u64 << shift.trim().parse::<u32>().expect("shift amount");
    }
    let parsed = match value.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => value.parse(),
    };
    parsed.unwrap_or_else(|_| panic!("{name} = {value}: not an integer"))
}

/// `#define NAME <integer>` values of the ABI headers (the preprocessor
/// constants are not in BTF, so read the header text itself).
fn header_define(name: &str) -> u64 {
    let value = HEADERS
        .iter()
        .flat_map(|(_, text)| text.lines())
        .filter_map(|l| l.trim().strip_prefix("#define "))
        .find_map(|l| {
            let (n, v) = l.split_once(char::is_whitespace)?;
            (n == name).then(|| v.trim().to_string())
        })
        .unwrap_or_else(|| panic!("#define {name} not found in the ABI headers"));
    parse_c_int(name, &value)
}

/// The enumerators `NAME = <integer>,` of `enum <enum_name>` in the ABI
/// headers (an enum the maps do not use is not in BTF either).
fn header_enum(enum_name: &str) -> Vec<(String, u64)> {
    let open = format!("enum {enum_name} {{");
    let (_, text) = HEADERS
        .iter()
        .find(|(_, text)| text.contains(&open))
        .unwrap_or_else(|| panic!("enum {enum_name} not found in the ABI headers"));
    let body = text
        .split_once(&open)
        .and_then(|(_, rest)| rest.split_once("};"))
        .map(|(body, _)| body)
        .unwrap_or_else(|| panic!("enum {enum_name}: no closing `}};`"));
    // comments out first: one may run over several lines
    let mut code = String::new();
    let mut rest = body;
    while let Some((before, after)) = rest.split_once("/*") {
        code.push_str(before);
        rest = after.split_once("*/").map_or("", |(_, a)| a);
    }
    code.push_str(rest);
    code.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (n, v) = l
                .split_once('=')
                .unwrap_or_else(|| panic!("enum {enum_name}: `{l}` has no explicit value"));
            let v = v.trim().trim_end_matches(',').trim();
            (n.trim().to_string(), parse_c_int(n.trim(), v))
        })
        .collect()
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

#[test]
fn dp_header_constants_match_rust() {
    assert_eq!(header_define("MPT_MAX_NH"), abi::MAX_NH as u64);
    assert_eq!(
        header_define("MPT_MAX_DP_ROUTES"),
        u64::from(abi::MAX_DP_ROUTES)
    );
    assert_eq!(header_define("MPT_MAX_GROUPS"), u64::from(abi::MAX_GROUPS));
    assert_eq!(
        header_define("MPT_STATS_SLOTS"),
        u64::from(abi::STATS_SLOTS)
    );
    assert_eq!(
        header_define("MPT_NH_F_ONLINK"),
        u64::from(abi::NH_F_ONLINK)
    );
    assert_eq!(
        header_define("MPT_DPR_F_VERIFIED"),
        u64::from(abi::DPR_F_VERIFIED)
    );
    assert_eq!(
        header_define("MPT_DPR_F_FOREIGN"),
        u64::from(abi::DPR_F_FOREIGN)
    );
    assert_eq!(
        header_define("MPT_DPR_F_DRIFT"),
        u64::from(abi::DPR_F_DRIFT)
    );
    assert_eq!(
        header_define("MPT_META_F_FIB4_GEN"),
        u64::from(abi::META_F_FIB4_GEN)
    );
    assert_eq!(
        header_define("MPT_META_F_NATIVE_CHECKED"),
        u64::from(mpt_bpf::mproute::state::META_F_NATIVE_CHECKED)
    );
    assert_eq!(
        header_define("MPT_META_F_NATIVE"),
        u64::from(mpt_bpf::mproute::state::META_F_NATIVE)
    );
    // The nexthop arrays really have MPT_MAX_NH entries.
    assert_eq!(MptGroup::default().nh.len(), abi::MAX_NH);
    assert_eq!(MptRouteStats::default().nh.len(), abi::MAX_NH);
}

/// `enum mpt_reason` and `abi::Reason` agree on every name and value:
/// `MPT_R_FOO_BAR` is the Rust reason named `"foo-bar"`.
#[test]
fn reasons_match_header_enum() {
    let header = header_enum("mpt_reason");
    let mut rust: Vec<(String, u64)> = Reason::ALL
        .iter()
        .map(|r| {
            (
                format!("MPT_R_{}", r.name().to_uppercase().replace('-', "_")),
                u64::from(r.as_u32()),
            )
        })
        .collect();
    rust.push(("MPT_R_MAX".to_string(), u64::from(abi::R_MAX)));
    assert_eq!(
        header, rust,
        "enum mpt_reason in dp_abi.h (left) != abi::Reason (right)"
    );
}

// ---- ILA (bpf/include/mpt/ila_abi.h, crates/bpf/src/ila/abi.rs) --------------------------

#[test]
fn ila_structs_match_btf() {
    use mpt_bpf::ila::abi::{
        IlaCounter, IlaMeta, IlaRouteKey, IlaRouteVal, IlaXlatKey, IlaXlatVal,
    };
    let btf = open_ila_btf();
    check(
        &btf,
        "ila_meta",
        rust_layout!(IlaMeta {
            abi_version,
            flags,
            netns_cookie
        }),
    );
    assert_eq!(
        btf_layout(&btf, "ila_meta").1[0],
        ("abi_version".to_string(), 0, 4)
    );
    check(
        &btf,
        "ila_xlat_key",
        rust_layout!(IlaXlatKey {
            locator_match,
            ifindex,
            pad
        }),
    );
    check(
        &btf,
        "ila_xlat_val",
        rust_layout!(IlaXlatVal {
            locator,
            csum_mode,
            ident_type,
            pad,
            stats_slot
        }),
    );
    check(
        &btf,
        "ila_route_key",
        rust_layout!(IlaRouteKey { prefixlen, addr }),
    );
    check(
        &btf,
        "ila_route_val",
        rust_layout!(IlaRouteVal {
            locator,
            csum_mode,
            ident_type,
            hook_type,
            pad,
            prefix_len,
            prefix,
            stats_slot
        }),
    );
    check(
        &btf,
        "ila_counter",
        rust_layout!(IlaCounter { packets, bytes }),
    );
}

#[test]
fn ila_map_definitions_match_abi() {
    use libbpf_rs::libbpf_sys::BPF_F_NO_PREALLOC;
    use mpt_bpf::ila::abi::{
        self as ila, IlaCounter, IlaMeta, IlaRouteKey, IlaRouteVal, IlaXlatKey, IlaXlatVal,
    };
    let u32_size = size_of::<u32>();
    let expected = [
        MapDef {
            name: "ila_meta",
            ty: MapType::Array,
            key_size: u32_size,
            value_size: IlaMeta::SIZE,
            max_entries: 1,
            flags: 0,
        },
        MapDef {
            name: "ila_xlat_in",
            ty: MapType::Hash,
            key_size: IlaXlatKey::SIZE,
            value_size: IlaXlatVal::SIZE,
            max_entries: ila::TABLE_START,
            flags: BPF_F_NO_PREALLOC,
        },
        MapDef {
            name: "ila_routes",
            ty: MapType::LpmTrie,
            key_size: IlaRouteKey::SIZE,
            value_size: IlaRouteVal::SIZE,
            max_entries: ila::MAX_ROUTES,
            flags: BPF_F_NO_PREALLOC,
        },
        MapDef {
            name: "ila_slot_stats",
            ty: MapType::PercpuArray,
            key_size: u32_size,
            value_size: IlaCounter::SIZE,
            max_entries: ila::STATS_SLOTS,
            flags: 0,
        },
        MapDef {
            name: "ila_xlat_stats_in",
            ty: MapType::PercpuHash,
            key_size: IlaXlatKey::SIZE,
            value_size: IlaCounter::SIZE,
            max_entries: ila::TABLE_START,
            flags: BPF_F_NO_PREALLOC,
        },
        MapDef {
            name: "ila_route_stats_in",
            ty: MapType::PercpuHash,
            key_size: IlaRouteKey::SIZE,
            value_size: IlaCounter::SIZE,
            max_entries: ila::TABLE_START,
            flags: BPF_F_NO_PREALLOC,
        },
        MapDef {
            name: "ila_reasons",
            ty: MapType::PercpuArray,
            key_size: u32_size,
            value_size: size_of::<u64>(),
            max_entries: ila::R_MAX,
            flags: 0,
        },
    ];
    check_maps(
        mpt_bpf::skel::ila::STATE_OBJ,
        "bpf/ila/maps.bpf.h",
        &expected,
        &["ila_anchor"],
    );
    // the state suite names exactly these maps
    let mut suite: Vec<&str> = mpt_bpf::ila::state::STATE_MAPS.to_vec();
    suite.sort_unstable();
    let mut want: Vec<&str> = expected
        .iter()
        .map(|d| d.name.strip_suffix("_in").unwrap_or(d.name))
        .collect();
    want.sort_unstable();
    assert_eq!(suite, want);
}

#[test]
fn ila_header_constants_match_rust() {
    use mpt_bpf::ila::abi::{self as ila, Reason};
    use mpt_model::ila::{CsumMode, HookType};
    assert_eq!(
        header_define("ILA_ABI_VERSION"),
        u64::from(ila::ABI_VERSION)
    );
    for (name, v) in [
        ("ILA_META_F_DEV_MAPPINGS", ila::META_F_DEV_MAPPINGS),
        ("ILA_META_F_INPUT_ROUTES", ila::META_F_INPUT_ROUTES),
        ("ILA_META_F_OUTPUT_ROUTES", ila::META_F_OUTPUT_ROUTES),
    ] {
        assert_eq!(header_define(name), u64::from(v), "{name}");
    }
    assert_eq!(
        header_define("ILA_MAX_MAPPINGS"),
        u64::from(ila::MAX_MAPPINGS)
    );
    assert_eq!(header_define("ILA_MAX_ROUTES"), u64::from(ila::MAX_ROUTES));
    assert_eq!(
        header_define("ILA_STATS_SLOTS"),
        u64::from(ila::STATS_SLOTS)
    );
    for (name, m) in [
        ("ILA_CSUM_ADJUST_TRANSPORT", CsumMode::AdjustTransport),
        ("ILA_CSUM_NEUTRAL_MAP", CsumMode::NeutralMap),
        ("ILA_CSUM_NO_ACTION", CsumMode::NoAction),
        ("ILA_CSUM_NEUTRAL_MAP_AUTO", CsumMode::NeutralMapAuto),
    ] {
        assert_eq!(header_define(name), u64::from(m.as_u8()), "{name}");
    }
    assert_eq!(
        header_define("ILA_HOOK_ROUTE_OUTPUT"),
        u64::from(HookType::Output.as_u8())
    );
    assert_eq!(
        header_define("ILA_HOOK_ROUTE_INPUT"),
        u64::from(HookType::Input.as_u8())
    );
    // enum ila_reason: ILA_R_<NAME> = index, in Reason::ALL order
    let header = header_enum("ila_reason");
    assert_eq!(header.len(), Reason::ALL.len() + 1);
    for (i, r) in Reason::ALL.iter().enumerate() {
        assert_eq!(header[i].1, *r as u64, "{}", header[i].0);
    }
    assert_eq!(
        header.last(),
        Some(&("ILA_R_MAX".to_string(), u64::from(ila::R_MAX)))
    );
}
