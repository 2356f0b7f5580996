//! Compiles upstream's vendored `generated.proto` files (`upstream/proto`) into one descriptor
//! set the protobuf transcoder reads at run time.

use std::path::PathBuf;

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from("upstream/proto");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    let mut pending = vec![root.clone()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "proto") {
                files.push(path.strip_prefix(&root)?.to_path_buf());
            }
        }
    }
    files.sort();
    let descriptors = protox::compile(&files, [&root])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?).join("kubernetes.descriptors");
    std::fs::write(out, descriptors.encode_to_vec())?;
    Ok(())
}
