//! Generated libbpf-rs skeletons of the programs in `bpf/<dir>/*.bpf.c`, one module per
//! directory.
//!
//! build.rs compiles each `bpf/<dir>/<name>.bpf.c` into `OUT_DIR/<name>.bpf.o` and generates
//! `OUT_DIR/<name>.skel.rs`, which `include_bytes!`s that object.

/// A module holding the generated skeleton `OUT_DIR/<name>.skel.rs`, with the lints the
/// generated code does not meet turned off.
macro_rules! skeleton {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[allow(
            clippy::all,
            clippy::pedantic,
            clippy::nursery,
            clippy::restriction,
            missing_docs,
            missing_debug_implementations,
            non_camel_case_types,
            non_snake_case,
            non_upper_case_globals,
            dead_code,
            unused_imports,
            unused_qualifications,
            unsafe_op_in_unsafe_fn
        )]
        pub mod $name {
            include!(concat!(env!("OUT_DIR"), "/", stringify!($name), ".skel.rs"));
        }
    };
}

/// mproute's programs (`bpf/mproute/`).
pub mod mproute {
    skeleton! {
        /// Skeleton of `bpf/mproute/state.bpf.c`: the per-namespace state maps (`mpt_meta`,
        /// `mpt_routes`, ...) and their tcx anchor program `mpt_anchor`.
        ///
        /// Entry points: [`state::StateSkelBuilder`] → `open()` → [`state::OpenStateSkel`]
        /// → `load()` → [`state::StateSkel`].
        state
    }

    /// The compiled BPF ELF object of `bpf/mproute/state.bpf.c`: the same file
    /// (`OUT_DIR/state.bpf.o`) the skeleton embeds and opens, e.g. for reading its BTF. (The
    /// skeleton's own copy is private to its generated module.)
    pub static STATE_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/state.bpf.o"));

    skeleton! {
        /// Skeleton of `bpf/mproute/dp.bpf.c`: the dataplane (`mpt_dp_xdp`, `mpt_dp_tc`),
        /// loaded with the namespace's state maps reused (see [`crate::mproute::dataplane`]).
        dp
    }

    skeleton! {
        /// Skeleton of `bpf/mproute/drops.bpf.c`: the `dropped` verdict of the XDP dataplane
        /// (two programs on the kernel's XDP tracepoints), loaded per attached device with
        /// `mpt_reasons` reused.
        drops
    }

    skeleton! {
        /// Skeleton of `bpf/mproute/fibgen.bpf.c`: `mpt_fib_gen` (sched_cls), run once with
        /// BPF_PROG_TEST_RUN to read the namespace's FIB generation (see
        /// [`crate::mproute::fib_generation`]). Never attached.
        fibgen
    }
}

/// The ILA translator's programs (`bpf/ila/`).
pub mod ila {
    skeleton! {
        /// Skeleton of `bpf/ila/ila_state.bpf.c`: the per-namespace ILA maps (`ila_meta`,
        /// `ila_xlat`, `ila_routes`, counters) and their tcx anchor `ila_anchor`.
        ila_state
    }

    /// The compiled object of `bpf/ila/ila_state.bpf.c`, for reading its BTF.
    pub static STATE_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ila_state.bpf.o"));

    skeleton! {
        /// Skeleton of `bpf/ila/ila.bpf.c`: the translator (`ila_in_xdp`, `ila_in_tc`,
        /// `ila_out_tc`), loaded with the namespace's ILA maps reused.
        ila
    }
}

/// pfanout's programs (`bpf/pfanout/`).
pub mod pfanout {
    skeleton! {
        /// Skeleton of `bpf/pfanout/pfanout_steer.bpf.c`: its `pfanout_steer` (socket filter)
        /// program steers the packets of an AF_PACKET fanout group in mode `ebpf`
        /// (PACKET_FANOUT_EBPF) by mproute's symmetric flow hash, seeded with the rodata
        /// `pfanout_seed` (see [`crate::pfanout`]).
        pfanout_steer
    }
}

/// Probes of what the kernel's verifier takes (`bpf/probe/`), loaded once by
/// [`crate::features`]: never attached.
pub mod probe {
    skeleton! {
        /// Skeleton of `bpf/probe/probe_global_args.bpf.c`: a global function with a pointer
        /// argument (Linux 5.12+).
        probe_global_args
    }
}

/// Test-only programs (`bpf/test/`): never attached.
pub mod test {
    skeleton! {
        /// Skeleton of `bpf/test/hash_test.bpf.c`: its `mpt_hash_test` (sched_cls) program
        /// returns `mpt_flow_hash()` of `bpf/include/mpt/flowhash.h` for a key passed as
        /// BPF_PROG_TEST_RUN `data_in`, so `tests/hash_parity.rs` can hold the C hash to
        /// `mpt_model::hash::flow_hash`.
        hash_test
    }
}

/// The benchmarks' programs (`bpf/bench/`), for `cargo xtask bench`: never attached by a tool.
pub mod bench {
    skeleton! {
        /// Skeleton of `bpf/bench/bench_fwd.bpf.c`: its `mpt_bench_fwd` (XDP) program is a
        /// minimal `bpf_fib_lookup` forwarder (xdp_fwd style), the baseline the benchmarks run
        /// next to `mpt_dp_xdp`.
        bench_fwd
    }

    skeleton! {
        /// Skeleton of `bpf/bench/gen.bpf.c`: its `mpt_bench_gen` (XDP) program is the packet
        /// generator of `cargo xtask bench forward`, run with BPF_PROG_TEST_RUN and
        /// `BPF_F_TEST_XDP_LIVE_FRAMES` (it returns XDP_TX).
        gen
    }

    skeleton! {
        /// Skeleton of `bpf/bench/tc_pass.bpf.c`: `mpt_bench_tc_in` and `mpt_bench_tc_out`
        /// return TCX_NEXT at once, the calibration of `cargo xtask bench ila`.
        tc_pass
    }

    skeleton! {
        /// Skeleton of `bpf/bench/sink.bpf.c`: XDP packet counters of `cargo xtask bench
        /// forward`: `mpt_bench_sink` and `mpt_bench_drop` count and drop, `mpt_bench_pass`
        /// counts and passes; one per-CPU slot each in `bench_cnt`.
        sink
    }
}
