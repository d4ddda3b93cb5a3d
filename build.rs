//! Release builds on Linux link a position-dependent executable: a PIE of this size carries
//! about 280,000 relocations that the loader applies at every start, a quarter of the time
//! of a short run such as `tidemark wh -c 'SELECT 1'`.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux");
    if linux && std::env::var("PROFILE").as_deref() == Ok("release") {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
