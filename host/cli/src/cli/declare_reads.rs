//! `preflight declare-reads`: a check's declaration of the parts of the object it reads, added to a built
//! component as the `preflight-reads` custom section the engine looks for (what the Rust SDK's `reads!`
//! writes at build time), so that checks in every language can have their input projected.

use super::{DeclareReadsArgs, EXIT_PROCEED, Problem, input};
use preflight_engine::{Projection, READS_SECTION};
use wasm_encoder::{ComponentSection, CustomSection};

pub fn declare_reads(args: &DeclareReadsArgs) -> Result<u8, Problem> {
    let mut component = input::read(&args.check)?;
    if let Some(declared) = &input::load_check(&component)?.info().reads {
        return Err(Problem::Input(format!(
            "{} already declares the parts of the object it reads ({}); a second declaration would add to \
             it, never narrow it. Run declare-reads on the component as built, not on its own output.",
            args.check.display(),
            declared.join(", ")
        )));
    }
    let projection = Projection::new(&args.paths)
        .map_err(|problem| Problem::Input(format!("--path {problem}")))?;
    CustomSection {
        name: READS_SECTION.into(),
        data: projection.section().into(),
    }
    .append_to_component(&mut component);
    let check = input::load_check(&component)?;
    input::write(&args.output, &component)?;
    println!(
        "{}: reads {}",
        args.output.display(),
        check.info().reads.as_deref().unwrap_or_default().join(", ")
    );
    Ok(EXIT_PROCEED)
}
