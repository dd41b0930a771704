//! What the running kernel has, found by asking it (its BTF, a system call that answers or
//! refuses), never by reading its version: once per process, cached.
//!
//! The programs decide most of this themselves when libbpf loads them (weak kfuncs and CO-RE
//! enum relocations, `bpf/include/mpt/lib/kern.h`). What is here is what user space must know
//! before the load (load-time constants, which hook to use) or to tell the operator what a
//! kernel lacks. Each [`Feature`] names the first mainline release that has it, for the one
//! line a tool prints where it has to refuse, and for `dataplane show`.

use std::ffi::CString;
use std::sync::OnceLock;

use libbpf_rs::btf::types::{Enum, Func, Struct};
use libbpf_rs::btf::Btf;

/// A kernel capability some feature of the tools depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Feature {
    /// tcx, the link-based tc hook (else: classic tc, a clsact qdisc and bpf filters).
    Tcx,
    /// `bpf_cast_to_kern_ctx`: the kernel's skb / xdp_buff behind a program's context (the FIB
    /// generation, skipping the per-packet kernel lookup, the skb's checksum state).
    KernCtx,
    /// `BPF_FIB_LOOKUP_SKIP_NEIGH`: a FIB lookup without the neighbour lookup.
    FibSkipNeigh,
    /// The veth driver's `struct veth_xdp_buff`: native XDP on a veth can ask the sender's
    /// skb whether a checksum is left to offload instead of verifying it.
    VethXdpBuff,
    /// `SO_NETNS_COOKIE`: a namespace identity the kernel never reuses.
    NetnsCookie,
    /// Global BPF functions with pointer arguments, each verified once: what mproute's
    /// dataplane is built of.
    GlobalFuncArgs,
}

impl Feature {
    /// The first mainline Linux release that has it.
    pub const fn since(self) -> &'static str {
        match self {
            Feature::Tcx => "6.6",
            Feature::KernCtx => "6.2",
            Feature::FibSkipNeigh => "6.3",
            Feature::VethXdpBuff => "6.3",
            Feature::NetnsCookie => "5.14",
            Feature::GlobalFuncArgs => "5.12",
        }
    }

    /// What it is, in the operator's words.
    pub const fn name(self) -> &'static str {
        match self {
            Feature::Tcx => "tcx",
            Feature::KernCtx => "bpf_cast_to_kern_ctx",
            Feature::FibSkipNeigh => "BPF_FIB_LOOKUP_SKIP_NEIGH",
            Feature::VethXdpBuff => "veth_xdp_buff",
            Feature::NetnsCookie => "SO_NETNS_COOKIE",
            Feature::GlobalFuncArgs => "BPF global functions with pointer arguments",
        }
    }

    /// Whether the running kernel has it.
    pub fn present(self) -> bool {
        match self {
            Feature::Tcx => tc_backend() == TcBackend::Tcx,
            Feature::KernCtx => kernel().kern_ctx,
            Feature::FibSkipNeigh => kernel().fib_skip_neigh,
            Feature::VethXdpBuff => veth_buf() != VethBuf::None,
            Feature::NetnsCookie => mpt_sys::netns::has_cookie(),
            Feature::GlobalFuncArgs => global_func_args(),
        }
    }
}

/// What vmlinux BTF says, read once.
#[derive(Debug, Clone, Copy, Default)]
struct Kernel {
    kern_ctx: bool,
    fib_skip_neigh: bool,
    veth_built_in: bool,
}

fn kernel() -> Kernel {
    static K: OnceLock<Kernel> = OnceLock::new();
    *K.get_or_init(|| {
        let Ok(btf) = Btf::from_vmlinux() else {
            return Kernel::default();
        };
        let kern_ctx = btf
            .type_by_name::<Func<'_>>("bpf_cast_to_kern_ctx")
            .is_some()
            && btf.type_by_name::<Func<'_>>("bpf_rdonly_cast").is_some();
        let fib_skip_neigh = btf.type_by_kind::<Enum<'_>>().any(|e| {
            e.iter()
                .any(|m| m.name.is_some_and(|n| n == "BPF_FIB_LOOKUP_SKIP_NEIGH"))
        });
        let veth_built_in = btf.type_by_name::<Struct<'_>>("veth_xdp_buff").is_some();
        Kernel {
            kern_ctx,
            fib_skip_neigh,
            veth_built_in,
        }
    })
}

/// Where the veth driver's `struct veth_xdp_buff` is described, if anywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VethBuf {
    /// Nowhere (a kernel before 6.3, or without veth's BTF): XDP cannot ask the skb.
    None,
    /// In vmlinux (veth built in): a program can name the type.
    BuiltIn,
    /// In the veth module's BTF, which a program cannot name: it reads at the offset after
    /// `struct xdp_buff` instead.
    Module,
}

/// Where `struct veth_xdp_buff` is (see [`VethBuf`]); also `None` without
/// [`Feature::KernCtx`], which reading it needs.
pub fn veth_buf() -> VethBuf {
    static V: OnceLock<VethBuf> = OnceLock::new();
    *V.get_or_init(|| {
        let k = kernel();
        if !k.kern_ctx {
            VethBuf::None
        } else if k.veth_built_in {
            VethBuf::BuiltIn
        } else if module_has_struct("veth", "veth_xdp_buff") {
            VethBuf::Module
        } else {
            VethBuf::None
        }
    })
}

/// Whether loaded module `module`'s BTF (`/sys/kernel/btf/<module>`, split over vmlinux's)
/// describes `struct name`.
fn module_has_struct(module: &str, name: &str) -> bool {
    let (Ok(m), Ok(n)) = (CString::new(module), CString::new(name)) else {
        return false;
    };
    // SAFETY: libbpf returns owned BTF objects or NULL (libbpf 1.x); each one loaded is freed
    // below, the module's (split over the base) before the base.
    unsafe {
        let base = libbpf_sys::btf__load_vmlinux_btf();
        if base.is_null() {
            return false;
        }
        let btf = libbpf_sys::btf__load_module_btf(m.as_ptr(), base);
        let found = !btf.is_null()
            && libbpf_sys::btf__find_by_name_kind(btf, n.as_ptr(), libbpf_sys::BTF_KIND_STRUCT) > 0;
        if !btf.is_null() {
            libbpf_sys::btf__free(btf);
        }
        libbpf_sys::btf__free(base);
        found
    }
}

/// Whether the FIB lookup may skip the neighbour (`BPF_FIB_LOOKUP_SKIP_NEIGH`, a program's
/// load-time flags).
pub fn fib_skip_neigh() -> bool {
    kernel().fib_skip_neigh
}

/// Whether programs can reach the kernel's skb / xdp_buff ([`Feature::KernCtx`]).
pub fn kern_ctx() -> bool {
    kernel().kern_ctx
}

/// Whether the verifier takes global functions with pointer arguments (loads a probe once).
pub fn global_func_args() -> bool {
    static G: OnceLock<bool> = OnceLock::new();
    *G.get_or_init(|| {
        use libbpf_rs::skel::{OpenSkel, SkelBuilder};
        let mut obj = std::mem::MaybeUninit::uninit();
        let loaded = crate::skel::probe::probe_global_args::ProbeGlobalArgsSkelBuilder::default()
            .open(&mut obj)
            .and_then(|o| o.load())
            .is_ok();
        // (the failed load's warnings are not a later refusal's)
        let _ = crate::log::take();
        loaded
    })
}

/// How tc programs are attached on this kernel: tcx (Linux 6.6+), or classic tc (a clsact
/// qdisc and direct-action filters) where tcx is missing. tcx's return codes are classic tc's
/// (TCX_NEXT is TC_ACT_UNSPEC, "go on"), so the same programs run on both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcBackend {
    /// tcx.
    Tcx,
    /// Classic tc, and why.
    Classic(&'static str),
}

/// The environment variable that makes the tools pretend tcx is missing (for tests of the
/// classic tc fallback on kernels that have tcx).
pub const FORCE_CLASSIC_TC: &str = "MPT_FORCE_CLASSIC_TC";

/// The backend, probed once: tcx unless [`FORCE_CLASSIC_TC`] is set to 1 or the kernel does
/// not know the tcx attach type (a query on lo answers EINVAL).
pub fn tc_backend() -> TcBackend {
    static B: std::sync::OnceLock<TcBackend> = std::sync::OnceLock::new();
    *B.get_or_init(|| {
        if std::env::var(FORCE_CLASSIC_TC).is_ok_and(|v| v == "1") {
            return TcBackend::Classic("forced by MPT_FORCE_CLASSIC_TC=1");
        }
        // a query of lo's tcx ingress: a kernel without tcx does not know the attach type
        let mut opts = libbpf_sys::bpf_prog_query_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_prog_query_opts>() as _,
            ..Default::default()
        };
        // SAFETY: opts outlives the call; no id array is given (count 0).
        let rc =
            unsafe { libbpf_sys::bpf_prog_query_opts(1, libbpf_sys::BPF_TCX_INGRESS, &mut opts) };
        if rc == -libc::EINVAL {
            TcBackend::Classic("the kernel has no tcx (Linux 6.6+)")
        } else {
            TcBackend::Tcx
        }
    })
}
