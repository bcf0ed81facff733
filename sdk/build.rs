//! Compiles the eBPF I/O collector's programs (sdk/src/host/ebpf/bpf/*.bpf.c) with clang when the
//! `ebpf` feature is on; does nothing otherwise, so the rest of the SDK builds without clang.

use std::env;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    println!("cargo:rerun-if-changed=build.rs");
    if env::var_os("CARGO_FEATURE_EBPF").is_none() {
        return ExitCode::SUCCESS;
    }
    let clang = env::var("JETS_BPF_CLANG").unwrap_or_else(|_| "clang".into());
    println!("cargo:rerun-if-env-changed=JETS_BPF_CLANG");
    let Some(out_dir) = env::var_os("OUT_DIR").map(PathBuf::from) else {
        println!("cargo:warning=OUT_DIR is not set");
        return ExitCode::FAILURE;
    };
    for name in ["io"] {
        let src = PathBuf::from(format!("src/host/ebpf/bpf/{name}.bpf.c"));
        println!("cargo:rerun-if-changed={}", src.display());
        let obj = out_dir.join(format!("{name}.bpf.o"));
        let status = Command::new(&clang)
            .args(["-target", "bpf", "-O2", "-g", "-Wall", "-Werror", "-c"])
            .arg(&src)
            .arg("-o")
            .arg(&obj)
            .status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => {
                eprintln!("error: `{clang} -target bpf` failed on {} ({s})", src.display());
                return ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!(
                    "error: the `ebpf` feature compiles BPF programs with clang, and `{clang}` \
                     could not be run: {e}. Install it (Debian/Ubuntu: `apt-get install clang \
                     llvm`), set JETS_BPF_CLANG to a clang that has the BPF target, or build \
                     without the `ebpf` feature."
                );
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
