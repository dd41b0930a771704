//! Build script for `mpt-bpf`.
//!
//! * Provides `OUT_DIR/include/vmlinux.h`: copied from `bpf/include/vmlinux.h`
//!   if someone checked one in, otherwise generated with
//!   `bpftool btf dump file /sys/kernel/btf/vmlinux format c` (we deliberately
//!   do not commit the 2.8 MB generated header). `BPFTOOL` and `VMLINUX_BTF`
//!   override the tool and the BTF file.
//! * Compiles every `bpf/<tool>/<name>.bpf.c` of the repository (`mproute/`,
//!   then `ila/`, `pfanout/`, and `test/`, `bench/`) with
//!   `libbpf_cargo::SkeletonBuilder` into `OUT_DIR/<name>.bpf.o` and
//!   `OUT_DIR/<name>.skel.rs` (the skeleton `include_bytes!`s the object);
//!   `<name>` is unique across the directories. `bpf/include/` holds the ABI
//!   headers and the helpers every program shares (`mpt/lib/`).
//!   The BPF compiler is `$BPF_CLANG`, default `clang-19`.
//! * Compiles every ABI header `bpf/include/mpt/*.h` once with the host C
//!   compiler (`$CC`, default `cc`) so its `_Static_assert`s are also checked
//!   against the host ABI.

use std::env;
use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const DEFAULT_CLANG: &str = "clang-19";
const DEFAULT_BPFTOOL: &str = "bpftool";
const DEFAULT_VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";
const DEFAULT_CC: &str = "cc";

fn main() {
    let manifest_dir = PathBuf::from(env_var("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env_var("OUT_DIR"));
    let repo = manifest_dir
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|e| fail(format!("cannot resolve the workspace root: {e}")));
    let bpf_dir = repo.join("bpf");
    let abi_include_dir = bpf_dir.join("include");
    let out_include = out_dir.join("include");

    for var in ["BPF_CLANG", "BPFTOOL", "VMLINUX_BTF", "CC"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    // The directory entry makes cargo rescan the whole tree (new files too);
    // the per-file lines below are explicit about what is used.
    println!("cargo:rerun-if-changed={}", bpf_dir.display());

    if !bpf_dir.is_dir() {
        fail(format!(
            "BPF source directory {} not found (expected <workspace>/bpf)",
            bpf_dir.display()
        ));
    }
    fs::create_dir_all(&out_include)
        .unwrap_or_else(|e| fail(format!("cannot create {}: {e}", out_include.display())));

    let mut sources = Vec::new();
    let mut headers = Vec::new();
    collect_files(&bpf_dir, &mut sources, &mut headers);
    // Programs are `bpf/<tool>/*.bpf.c`; `bpf/include/` holds headers.
    sources.retain(|p| {
        p.parent().and_then(Path::parent) == Some(bpf_dir.as_path())
            && file_name(p).ends_with(".bpf.c")
    });
    sources.sort();
    let mut names: Vec<String> = sources.iter().map(|p| file_name(p)).collect();
    names.sort();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        fail(format!(
            "two BPF programs are called {} (skeleton names must be unique across bpf/*/)",
            w[0]
        ));
    }
    headers.sort();
    for f in sources.iter().chain(headers.iter()) {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    if sources.is_empty() {
        fail(format!("no */*.bpf.c files found in {}", bpf_dir.display()));
    }

    provide_vmlinux_h(&abi_include_dir, &out_include);

    let clang = env::var_os("BPF_CLANG").unwrap_or_else(|| DEFAULT_CLANG.into());
    check_tool(
        &clang,
        "--version",
        &format!(
            "{} not found: run `cargo xtask setup` or `apt-get install clang-19` \
             (or point BPF_CLANG at a clang that can target bpf)",
            clang.to_string_lossy()
        ),
    );

    let clang_args = [
        OsStr::new("-I").to_os_string(),
        out_include.clone().into_os_string(),
        OsStr::new("-I").to_os_string(),
        abi_include_dir.clone().into_os_string(),
        OsStr::new("-Wall").to_os_string(),
        OsStr::new("-Werror").to_os_string(),
    ];

    for src in &sources {
        let fname = file_name(src);
        let name = fname.trim_end_matches(".bpf.c");
        let obj = out_dir.join(format!("{name}.bpf.o"));
        let skel = out_dir.join(format!("{name}.skel.rs"));
        libbpf_cargo::SkeletonBuilder::new()
            .source(src)
            .obj(&obj)
            .reference_obj(true)
            .clang(&clang)
            .clang_args(&clang_args)
            .build_and_generate(&skel)
            .unwrap_or_else(|e| {
                fail(format!(
                    "building BPF skeleton for {}: {e:#}",
                    src.display()
                ))
            });
    }

    host_abi_check(&abi_include_dir, &headers, &out_dir);
}

/// `bpf/include/vmlinux.h` if present, else `bpftool btf dump`.
fn provide_vmlinux_h(abi_include_dir: &Path, out_include: &Path) {
    let dst = out_include.join("vmlinux.h");
    let checked_in = abi_include_dir.join("vmlinux.h");
    if checked_in.is_file() {
        fs::copy(&checked_in, &dst).unwrap_or_else(|e| {
            fail(format!(
                "cannot copy {} to {}: {e}",
                checked_in.display(),
                dst.display()
            ))
        });
        return;
    }

    let bpftool = env::var_os("BPFTOOL").unwrap_or_else(|| DEFAULT_BPFTOOL.into());
    let btf = env::var_os("VMLINUX_BTF").unwrap_or_else(|| DEFAULT_VMLINUX_BTF.into());
    let btf_path = PathBuf::from(&btf);
    if !btf_path.exists() {
        fail(format!(
            "kernel BTF {} not found: vmlinux.h cannot be generated. Build on a kernel \
             with CONFIG_DEBUG_INFO_BTF=y, set VMLINUX_BTF to a BTF/vmlinux file, or put a \
             generated header at {}",
            btf_path.display(),
            checked_in.display()
        ));
    }
    println!("cargo:rerun-if-changed={}", btf_path.display());

    let output = Command::new(&bpftool)
        .args([OsStr::new("btf"), OsStr::new("dump"), OsStr::new("file")])
        .arg(&btf)
        .args(["format", "c"])
        .output()
        .unwrap_or_else(|e| {
            fail(format!(
                "{} not found ({e}): it is needed to generate vmlinux.h; run `cargo xtask setup` \
                 or `apt-get install bpftool` (or set BPFTOOL, or check in {})",
                bpftool.to_string_lossy(),
                checked_in.display()
            ))
        });
    if !output.status.success() || output.stdout.is_empty() {
        fail(format!(
            "`{} btf dump file {} format c` failed ({}): {}",
            bpftool.to_string_lossy(),
            btf_path.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    // Only rewrite when the content changed, to keep mtimes stable.
    if fs::read(&dst).ok().as_deref() != Some(output.stdout.as_slice()) {
        fs::write(&dst, &output.stdout)
            .unwrap_or_else(|e| fail(format!("cannot write {}: {e}", dst.display())));
    }
}

/// Compile every ABI header under `bpf/include/mpt` with the host C compiler
/// so that the `_Static_assert`s also hold for the host (user-space) ABI.
fn host_abi_check(abi_include_dir: &Path, headers: &[PathBuf], out_dir: &Path) {
    let mpt_dir = abi_include_dir.join("mpt");
    let abi_headers: Vec<String> = headers
        .iter()
        .filter(|h| h.parent() == Some(mpt_dir.as_path()))
        .filter_map(|h| h.strip_prefix(abi_include_dir).ok())
        .map(|h| h.to_string_lossy().into_owned())
        .collect();
    if !abi_headers.iter().any(|h| h == "mpt/state_abi.h") {
        fail(format!(
            "ABI header {} not found",
            mpt_dir.join("state_abi.h").display()
        ));
    }

    let mut c = String::from("/* generated by crates/bpf/build.rs: host-compiler ABI check */\n");
    for h in &abi_headers {
        c.push_str(&format!("#include \"{h}\"\n"));
    }
    c.push_str("int mpt_abi_host_check(void);\nint mpt_abi_host_check(void) { return 0; }\n");
    let check_c = out_dir.join("abi_host_check.c");
    fs::write(&check_c, c)
        .unwrap_or_else(|e| fail(format!("cannot write {}: {e}", check_c.display())));

    let cc = env::var_os("CC").unwrap_or_else(|| DEFAULT_CC.into());
    let output = Command::new(&cc)
        .args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-fsyntax-only",
            "-I",
        ])
        .arg(abi_include_dir)
        .arg(&check_c)
        .output()
        .unwrap_or_else(|e| {
            fail(format!(
                "host C compiler `{}` not found ({e}): install gcc (`apt-get install gcc`) \
                 or set CC",
                cc.to_string_lossy()
            ))
        });
    if !output.status.success() {
        fail(format!(
            "ABI headers do not compile with the host C compiler `{}` (static asserts?):\n{}",
            cc.to_string_lossy(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
}

/// Recursively collect `*.c` and `*.h` files (except a checked-in vmlinux.h,
/// which is tracked through the directory).
fn collect_files(dir: &Path, c_files: &mut Vec<PathBuf>, h_files: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(dir)
        .unwrap_or_else(|e| fail(format!("cannot read directory {}: {e}", dir.display())));
    for entry in entries {
        let path = entry
            .unwrap_or_else(|e| fail(format!("cannot read directory {}: {e}", dir.display())))
            .path();
        if path.is_dir() {
            collect_files(&path, c_files, h_files);
        } else if path.extension() == Some(OsStr::new("c")) {
            c_files.push(path);
        } else if path.extension() == Some(OsStr::new("h")) && file_name(&path) != "vmlinux.h" {
            h_files.push(path);
        }
    }
}

fn check_tool(tool: &OsStr, arg: &str, missing: &str) {
    match Command::new(tool).arg(arg).output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => fail(format!(
            "{missing}\n(`{} {arg}` exited with {})",
            tool.to_string_lossy(),
            o.status
        )),
        Err(e) => fail(format!("{missing}\n({e})")),
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn env_var(name: &str) -> String {
    env::var(name).unwrap_or_else(|_| fail(format!("cargo did not set {name}")))
}

fn fail(msg: String) -> ! {
    panic!("mpt-bpf build: {msg}")
}
