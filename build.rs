//! Bakes the venv's libtorch folder into the rpath of every binary, test and bench of this
//! package, so that they run without LD_LIBRARY_PATH (see .cargo/config.toml).
//! Where libtorch ships its CUDA library, it is linked even though nothing references it
//! directly (the linker's --as-needed would drop it): that is what lets tch see CUDA.
fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    if let Ok(libtorch) = std::env::var("LIBTORCH") {
        let lib = std::path::Path::new(&libtorch).join("lib");
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
        if lib.join("libtorch_cuda.so").exists() {
            println!("cargo:rustc-link-arg=-Wl,--no-as-needed,-ltorch_cuda,--as-needed");
        }
    }
}
