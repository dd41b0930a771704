//! The contexts a BPF_PROG_TEST_RUN of an XDP or tc program takes, and the verdicts it returns,
//! for the BPF fixtures (UAPI numbers; the fixtures check the offsets against their skeletons'
//! BTF types).

/// `XDP_PASS`.
pub const XDP_PASS: u32 = 2;
/// `XDP_REDIRECT`.
pub const XDP_REDIRECT: u32 = 4;
/// `TC_ACT_REDIRECT`.
pub const TC_ACT_REDIRECT: u32 = 7;
/// `TCX_NEXT` (-1) as the u32 a test run returns.
pub const TCX_NEXT: u32 = u32::MAX;

/// `struct __sk_buff` offset of `ingress_ifindex`.
pub const SKB_INGRESS_IFINDEX: usize = 36;
/// `struct __sk_buff` offset of `ifindex`.
pub const SKB_IFINDEX: usize = 40;
/// `struct __sk_buff` offset of `gso_segs`.
pub const SKB_GSO_SEGS: usize = 164;
/// `struct __sk_buff` offset of `gso_size`.
pub const SKB_GSO_SIZE: usize = 176;
/// `sizeof(struct __sk_buff)`.
pub const SKB_SIZE: usize = 192;
/// `sizeof(struct xdp_md)`.
pub const XDP_MD_SIZE: usize = 24;
/// `struct xdp_md` offset of `ingress_ifindex`.
pub const XDP_MD_INGRESS_IFINDEX: usize = 12;

/// A `struct xdp_md` for a frame of `len` bytes arriving on `ingress` (a device of the
/// calling thread's namespace with a receive queue: a veth, not `lo`).
pub fn xdp_ctx(len: usize, ingress: u32) -> Vec<u8> {
    // data, data_end, data_meta, ingress_ifindex, rx_queue_index, egress_ifindex
    let mut c = Vec::with_capacity(XDP_MD_SIZE);
    for w in [0, len as u32, 0, ingress, 0, 0] {
        c.extend_from_slice(&w.to_ne_bytes());
    }
    c
}

/// A `struct __sk_buff` for a packet on `ingress` (also its `ifindex`), optionally a GSO
/// packet of `(segments, size)`.
pub fn skb_ctx(ingress: u32, gso: Option<(u32, u32)>) -> Vec<u8> {
    let mut c = vec![0u8; SKB_SIZE];
    c[SKB_INGRESS_IFINDEX..SKB_INGRESS_IFINDEX + 4].copy_from_slice(&ingress.to_ne_bytes());
    c[SKB_IFINDEX..SKB_IFINDEX + 4].copy_from_slice(&ingress.to_ne_bytes());
    if let Some((segs, size)) = gso {
        c[SKB_GSO_SEGS..SKB_GSO_SEGS + 4].copy_from_slice(&segs.to_ne_bytes());
        c[SKB_GSO_SIZE..SKB_GSO_SIZE + 4].copy_from_slice(&size.to_ne_bytes());
    }
    c
}

/// Inputs BPF_PROG_TEST_RUN itself rejects with EINVAL on Linux 6.18, before any program runs:
/// frames shorter than an Ethernet header (both program types) and, for an skb (`tc`), an
/// untagged IPv4 frame shorter than 14 + 20 bytes or IPv6 frame shorter than 14 + 40 bytes
/// (the test run checks the network header of the protocol `eth_type_trans` found).
pub fn kernel_refuses(tc: bool, f: &[u8]) -> bool {
    if f.len() < 14 {
        return true;
    }
    let et = u16::from_be_bytes([f[12], f[13]]);
    tc && ((et == crate::packet::ETH_P_IP && f.len() < 34)
        || (et == crate::packet::ETH_P_IPV6 && f.len() < 54))
}
