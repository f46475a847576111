//! Names the x86-64 SIMD build as one cfg, `x86_simd`: AVX2, FMA and F16C all
//! enabled at build time (the workspace's `.cargo/config.toml` enables them),
//! so the code states the condition once instead of repeating its four parts.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(x86_simd)");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let features = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    let enabled = |feature: &str| features.split(',').any(|f| f == feature);
    if arch == "x86_64" && enabled("avx2") && enabled("fma") && enabled("f16c") {
        println!("cargo::rustc-cfg=x86_simd");
    }
}
