//! `preflight componentize`: a check component from the WebAssembly core module that C (clang and
//! wasi-libc) and Go (its wasip1 port) build, as a wasip1 reactor. Optionally embeds the world's component
//! type from WIT (Go's build carries none; wit-bindgen's C bindings link it in as an object file), then
//! wraps the module in a component with the wasip1 reactor adapter of this binary's wasmtime, so that its
//! WASI imports are those the host links. What `wasm-tools component embed` and `component new` did, with
//! the same libraries, so that authors of C and Go checks need no tool besides their compiler and this one.

use super::{ComponentizeArgs, EXIT_PROCEED, Problem, input};
use wasi_preview1_component_adapter_provider::{
    WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME, WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
};
use wit_component::{ComponentEncoder, StringEncoding, embed_component_metadata};
use wit_parser::Resolve;

pub fn componentize(args: &ComponentizeArgs) -> Result<u8, Problem> {
    let mut module = input::read(&args.module)?;
    let refused = |why: String| Problem::Input(format!("{}: {why}", args.module.display()));
    if wasmparser::Parser::is_component(&module) {
        return Err(refused(
            "is a component already (`preflight inspect` describes it)".to_owned(),
        ));
    }
    if !wasmparser::Parser::is_core_wasm(&module) {
        return Err(refused(
            "is not a WebAssembly core module (it does not start with \\0asm, version 1)"
                .to_owned(),
        ));
    }
    let size = module.len();
    if let Some(wit) = &args.wit {
        let mut resolve = Resolve::default();
        let (package, _) = resolve
            .push_path(wit)
            .map_err(|error| Problem::Input(format!("--wit {}: {error:#}", wit.display())))?;
        let world = resolve
            .select_world(&[package], args.world.as_deref())
            .map_err(|error| Problem::Input(format!("--world: {error:#}")))?;
        embed_component_metadata(&mut module, &resolve, world, StringEncoding::UTF8).map_err(
            |error| {
                refused(format!(
                    "cannot embed the world's component type: {error:#}"
                ))
            },
        )?;
    } else if !carries_component_type(&module) {
        return Err(refused(
            "carries no component type: name the world it implements with --wit DIR --world \
             PACKAGE/WORLD (a Go build needs them; C builds link the type in from their bindings)"
                .to_owned(),
        ));
    }
    let component = ComponentEncoder::default()
        .validate(true)
        .module(&module)
        .and_then(|encoder| {
            encoder.adapter(
                WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
                WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
            )
        })
        .and_then(|mut encoder| encoder.encode())
        .map_err(|error| refused(format!("cannot make a component of it: {error:#}")))?;
    let check = input::load_check(&component)?;
    input::write(&args.output, &component)?;
    println!(
        "{}: {} ({} -> {} bytes), sha256 {}",
        args.output.display(),
        check.info().world,
        size,
        component.len(),
        check.info().digest
    );
    Ok(EXIT_PROCEED)
}

/// Whether `module` has a `component-type` custom section: what wit-bindgen's object file links in and
/// `--wit` embeds, the description of the world the encoder makes the component for.
fn carries_component_type(module: &[u8]) -> bool {
    wasmparser::Parser::new(0).parse_all(module).any(|payload| {
        matches!(payload, Ok(wasmparser::Payload::CustomSection(section))
            if section.name().starts_with("component-type"))
    })
}
