//! `packet_diag`: AF_PACKET sockets through sock_diag (`include/uapi/linux/packet_diag.h`,
//! `net/packet/diag.c`). Dump only; the kernel returns every packet socket of the requester's
//! namespace whatever inode or cookie the request names.
//!
//! ```text
//! packet_diag_req (20): family u8 = AF_PACKET, protocol u8 = 0 (else EINVAL), pad u16,
//!                       ino u32, show u32 (PACKET_SHOW_*), cookie u32[2]
//! packet_diag_msg (16): family u8, type u8 (SOCK_RAW 3, SOCK_DGRAM 2), num u16 (the bound
//!                       protocol, host order), ino u32, cookie u32[2]; then attributes,
//!                       numbered from 0
//! ```
//!
//! `PACKET_DIAG_FANOUT` is `id | mode << 16`: the kernel does not report the fanout flags
//! (rollover, defrag, ...); only `getsockopt(PACKET_FANOUT)` on the socket itself does.

use super::SOCK_DIAG_BY_FAMILY;
use crate::msg::attr::{get_u32, Attrs, DecodeError};
use crate::msg::{flags, Request};

/// `AF_PACKET`.
pub const AF_PACKET: u8 = 17;

/// `PACKET_SHOW_*`: what the dump carries.
#[allow(missing_docs)]
pub mod show {
    pub const INFO: u32 = 0x01;
    pub const MCLIST: u32 = 0x02;
    pub const RING_CFG: u32 = 0x04;
    pub const FANOUT: u32 = 0x08;
    pub const MEMINFO: u32 = 0x10;
    pub const FILTER: u32 = 0x20;
}

/// `PACKET_DIAG_*` attribute numbers (from 0).
#[allow(missing_docs)]
pub mod attr {
    pub const INFO: u16 = 0;
    pub const MCLIST: u16 = 1;
    pub const RX_RING: u16 = 2;
    pub const TX_RING: u16 = 3;
    pub const FANOUT: u16 = 4;
    pub const UID: u16 = 5;
    pub const MEMINFO: u16 = 6;
    pub const FILTER: u16 = 7;
}

/// `SK_MEMINFO_*` indexes of `PACKET_DIAG_MEMINFO`.
#[allow(missing_docs)]
pub mod meminfo {
    pub const RMEM_ALLOC: usize = 0;
    pub const RCVBUF: usize = 1;
    pub const WMEM_ALLOC: usize = 2;
    pub const SNDBUF: usize = 3;
    pub const FWD_ALLOC: usize = 4;
    pub const WMEM_QUEUED: usize = 5;
    pub const OPTMEM: usize = 6;
    pub const BACKLOG: usize = 7;
    pub const DROPS: usize = 8;
    /// `SK_MEMINFO_VARS`.
    pub const VARS: usize = 9;
}

/// The dump of every packet socket, with `show` (`PACKET_SHOW_*`) of each.
pub fn dump_request(show: u32) -> Request {
    let mut p = Vec::with_capacity(20);
    p.push(AF_PACKET); // sdiag_family
    p.push(0); // sdiag_protocol: must be 0
    p.extend_from_slice(&[0, 0]); // pad
    p.extend_from_slice(&0u32.to_ne_bytes()); // pdiag_ino: not filtered by the kernel
    p.extend_from_slice(&show.to_ne_bytes()); // pdiag_show
    p.extend_from_slice(&[0; 8]); // pdiag_cookie: not filtered by the kernel either
    Request {
        ty: SOCK_DIAG_BY_FAMILY,
        flags: flags::REQUEST | flags::DUMP,
        payload: p,
    }
}

/// `struct packet_diag_info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Info {
    /// The bound device (0: any).
    pub ifindex: u32,
    /// `PACKET_VERSION` (TPACKET_V1 0, V2 1, V3 2).
    pub version: u32,
    /// `PACKET_RESERVE`.
    pub reserve: u32,
    /// `PACKET_COPY_THRESH`.
    pub copy_thresh: u32,
    /// `PACKET_TIMESTAMP`.
    pub tstamp: u32,
    /// `PDI_*` flags (running 0x1, auxdata 0x2, origdev 0x4, vnet header 0x8, loss 0x10).
    pub flags: u32,
}

/// `struct packet_diag_ring`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ring {
    /// Block size in bytes.
    pub block_size: u32,
    /// Blocks.
    pub block_nr: u32,
    /// Frame size in bytes.
    pub frame_size: u32,
    /// Frames.
    pub frame_nr: u32,
    /// TPACKET_V3 block retire timeout (ms).
    pub retire_tmo: u32,
    /// TPACKET_V3 private area per block.
    pub sizeof_priv: u32,
    /// TPACKET_V3 features.
    pub features: u32,
}

/// One packet socket.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PacketSock {
    /// `SOCK_RAW` (3) or `SOCK_DGRAM` (2).
    pub sock_type: u8,
    /// The bound protocol (host order, `ETH_P_ALL` 0x0003).
    pub protocol: u16,
    /// The socket's inode (`socket:[INO]` in `/proc/PID/fd`).
    pub ino: u32,
    /// The socket's cookie.
    pub cookie: u64,
    /// `PACKET_DIAG_INFO`.
    pub info: Option<Info>,
    /// `PACKET_DIAG_RX_RING`.
    pub rx_ring: Option<Ring>,
    /// `PACKET_DIAG_TX_RING`.
    pub tx_ring: Option<Ring>,
    /// `PACKET_DIAG_FANOUT`: (group id, mode); no flags (see the module doc).
    pub fanout: Option<(u16, u16)>,
    /// `PACKET_DIAG_UID`.
    pub uid: Option<u32>,
    /// `PACKET_DIAG_MEMINFO` (`SK_MEMINFO_*`).
    pub meminfo: Option<[u32; meminfo::VARS]>,
}

fn u32s<const N: usize>(p: &[u8], what: &str) -> Result<[u32; N], DecodeError> {
    let mut out = [0u32; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = get_u32(p.get(i * 4..).unwrap_or(&[]), what)?;
    }
    Ok(out)
}

fn ring(p: &[u8], what: &str) -> Result<Ring, DecodeError> {
    let [block_size, block_nr, frame_size, frame_nr, retire_tmo, sizeof_priv, features] =
        u32s::<7>(p, what)?;
    Ok(Ring {
        block_size,
        block_nr,
        frame_size,
        frame_nr,
        retire_tmo,
        sizeof_priv,
        features,
    })
}

/// Decode one answer (payload after the `nlmsghdr`). Attributes this version does not know
/// are skipped.
pub fn decode(payload: &[u8]) -> Result<PacketSock, DecodeError> {
    if payload.len() < 16 {
        return Err(DecodeError::new("packet_diag_msg", "shorter than 16 bytes"));
    }
    let mut s = PacketSock {
        sock_type: payload[1],
        protocol: u16::from_ne_bytes([payload[2], payload[3]]),
        ino: u32::from_ne_bytes([payload[4], payload[5], payload[6], payload[7]]),
        cookie: u64::from(u32::from_ne_bytes([
            payload[8],
            payload[9],
            payload[10],
            payload[11],
        ])) | u64::from(u32::from_ne_bytes([
            payload[12],
            payload[13],
            payload[14],
            payload[15],
        ])) << 32,
        ..PacketSock::default()
    };
    if payload[0] != AF_PACKET {
        return Err(DecodeError::new(
            "packet_diag_msg",
            "not an AF_PACKET answer",
        ));
    }
    for (ty, v) in Attrs::new(&payload[16..])
        .to_vec()
        .map_err(|e| e.within("packet_diag_msg"))?
    {
        match ty {
            attr::INFO => {
                let [ifindex, version, reserve, copy_thresh, tstamp, flags] =
                    u32s::<6>(v, "PACKET_DIAG_INFO")?;
                s.info = Some(Info {
                    ifindex,
                    version,
                    reserve,
                    copy_thresh,
                    tstamp,
                    flags,
                });
            }
            attr::RX_RING => s.rx_ring = Some(ring(v, "PACKET_DIAG_RX_RING")?),
            attr::TX_RING => s.tx_ring = Some(ring(v, "PACKET_DIAG_TX_RING")?),
            attr::FANOUT => {
                let f = get_u32(v, "PACKET_DIAG_FANOUT")?;
                s.fanout = Some(((f & 0xffff) as u16, (f >> 16) as u16));
            }
            attr::UID => s.uid = Some(get_u32(v, "PACKET_DIAG_UID")?),
            attr::MEMINFO => s.meminfo = Some(u32s::<{ meminfo::VARS }>(v, "PACKET_DIAG_MEMINFO")?),
            _ => {}
        }
    }
    Ok(s)
}
