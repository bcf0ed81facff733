//! Gives the shared library the soname `libjets.so.0`, so programs linked against it keep working
//! across compatible releases (the install script adds the matching symlinks).

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libjets.so.0");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
