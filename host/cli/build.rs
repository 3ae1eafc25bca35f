//! Rebuilds the command when what `preflight scaffold` embeds changes: `include_dir!` cannot tell cargo which
//! files it read (not on stable Rust), so a new SDK file would otherwise be missing from scaffolds until a
//! clean build.
fn main() {
    for embedded in ["../../guest-sdk", "../../wit", "scaffold"] {
        println!("cargo:rerun-if-changed={embedded}");
    }
}
