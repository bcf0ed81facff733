//! Compiles the eBPF I/O collector's programs (sdk/host/src/ebpf/bpf/io.bpf.c) with clang when the
//! `ebpf` feature is on; does nothing otherwise, so the rest of the SDK builds without clang.

use std::env;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

const SOURCE: &str = "src/ebpf/bpf/io.bpf.c";

fn main() -> ExitCode {
    println!("cargo:rerun-if-changed=build.rs");
    if env::var_os("CARGO_FEATURE_EBPF").is_none() {
        return ExitCode::SUCCESS;
    }
    println!("cargo:rerun-if-env-changed=JETS_BPF_CLANG");
    println!("cargo:rerun-if-changed={SOURCE}");
    let clang = env::var("JETS_BPF_CLANG").unwrap_or_else(|_| "clang".into());
    let Some(out_dir) = env::var_os("OUT_DIR").map(PathBuf::from) else {
        eprintln!("error: OUT_DIR is not set (build.rs must run under cargo)");
        return ExitCode::FAILURE;
    };
    let status = Command::new(&clang)
        .args(["-target", "bpf", "-O2", "-g", "-Wall", "-Werror", "-c", SOURCE, "-o"])
        .arg(out_dir.join("io.bpf.o"))
        .status();
    match status {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(s) => {
            eprintln!("error: `{clang} -target bpf` failed on {SOURCE} ({s})");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!(
                "error: the `ebpf` feature compiles BPF programs with clang, and `{clang}` could \
                 not be run: {e}. Install it (Debian/Ubuntu: `apt-get install clang llvm`), set \
                 JETS_BPF_CLANG to a clang with the BPF target, or build without the `ebpf` \
                 feature."
            );
            ExitCode::FAILURE
        }
    }
}
