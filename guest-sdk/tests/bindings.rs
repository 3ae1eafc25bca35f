//! The C and Go SDKs carry their bindings of the guest world (`guest-sdk/c/bindings`,
//! `guest-sdk/go/bindings`), so that C and Go checks build with their compiler and the `preflight` CLI alone.
//! They must be exactly what wit-bindgen 0.61.1 generates from `guest-sdk/wit` now. After a change to the
//! WIT, write them again with `PREFLIGHT_WRITE_BINDINGS=1 cargo test -p preflight-guest --test bindings`.

use std::path::{Path, PathBuf};
use wit_bindgen_core::wit_parser::Resolve;
use wit_bindgen_core::{Files, WorldGenerator};

/// The world C and Go checks are built for: the contract and `wasi:http` (a check that sends no request
/// imports no `wasi:http`).
const GUEST_WORLD: &str = "preflight:guest/check";

fn sdk_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// What `generator` makes of the guest world.
fn generate(mut generator: Box<dyn WorldGenerator>) -> Files {
    let mut resolve = Resolve::default();
    let (package, _) = resolve
        .push_path(sdk_dir().join("wit"))
        .expect("guest-sdk/wit parses");
    let world = resolve
        .select_world(&[package], Some(GUEST_WORLD))
        .expect("guest-sdk/wit has the guest world");
    let mut files = Files::default();
    generator
        .generate(&mut resolve, world, &mut files)
        .expect("wit-bindgen generates the bindings");
    files
}

/// Fails, naming the files, unless `dir` holds `files` as generated (beside them, the Go SDK keeps the export
/// packages its bindings call); with `PREFLIGHT_WRITE_BINDINGS` set, writes them there instead.
fn assert_committed(files: &Files, dir: &Path) {
    let write = std::env::var_os("PREFLIGHT_WRITE_BINDINGS").is_some();
    let mut stale = Vec::new();
    for (name, contents) in files.iter() {
        let path = dir.join(name);
        if write {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, contents).unwrap();
        } else if std::fs::read(&path).ok().as_deref() != Some(contents) {
            stale.push(name.to_owned());
        }
    }
    assert!(
        stale.is_empty(),
        "{}: not as generated: {}. Write them again from guest-sdk/wit with `PREFLIGHT_WRITE_BINDINGS=1 \
         cargo test -p preflight-guest --test bindings`.",
        dir.display(),
        stale.join(", ")
    );
}

#[test]
fn the_c_sdk_s_bindings_are_generated_from_the_guest_world() {
    let files = generate(wit_bindgen_c::Opts::default().build());
    assert_committed(&files, &sdk_dir().join("c/bindings"));
}

#[test]
fn the_go_sdk_s_bindings_are_generated_from_the_guest_world() {
    // wit-bindgen formats Go with gofmt when it finds it, and silently leaves the code unformatted when not.
    let gofmt = std::process::Command::new("gofmt")
        .stdin(std::process::Stdio::null())
        .output();
    assert!(
        gofmt.is_ok_and(|ran| ran.status.success()),
        "gofmt is not on PATH (Go's installation has it): wit-bindgen formats the Go bindings with it"
    );
    let options = wit_bindgen_go::Opts {
        pkg_name: Some("github.com/preflight-wasm/preflight/guest-sdk/go/bindings".into()),
        ..wit_bindgen_go::Opts::default()
    };
    assert_committed(&generate(options.build()), &sdk_dir().join("go/bindings"));
}
