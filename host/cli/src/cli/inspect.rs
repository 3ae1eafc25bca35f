//! `preflight inspect`: what a component is, and whether this host can run it as a check.

use super::{EXIT_PROCEED, Format, InspectArgs, Problem, input};
use serde_json::json;

pub fn inspect(args: InspectArgs) -> Result<u8, Problem> {
    let check = input::load_check(&input::read(&args.check)?)?;
    let info = check.info();
    match args.output {
        Format::Json => println!(
            "{:#}",
            json!({
                "world": info.world,
                "sha256": info.digest.to_string(),
                "size": info.size,
                "imports": info.imports,
                "exports": info.exports,
                "reads": info.reads,
            })
        ),
        Format::Text => {
            println!("world     {}", info.world);
            println!("sha256    {}", info.digest);
            println!(
                "size      {} bytes ({})",
                info.size,
                bytesize::ByteSize(info.size as u64)
            );
            println!("imports   {}", info.imports.join(", "));
            println!("exports   {}", info.exports.join(", "));
            match &info.reads {
                Some(reads) => println!("reads     {}", reads.join(", ")),
                None => println!("reads     the whole object (no declaration)"),
            }
        }
    }
    Ok(EXIT_PROCEED)
}
