//! `preflight snapshot`: a check pre-initialised at build time (its language runtime started once, the
//! state it left written into the component), so that every fresh instance begins there. The Go SDK's
//! `build.sh` runs it; the engine's `pre_initialize` does the work.

use super::{EXIT_PROCEED, Problem, SnapshotArgs, input};
use preflight_engine::Limits;
use std::sync::Arc;

pub async fn snapshot(args: SnapshotArgs) -> Result<u8, Problem> {
    let bytes = input::read(&args.check)?;
    let engine = Arc::new(input::engine(1, args.memory_limit)?);
    let limits = Limits {
        timeout: args.timeout,
        memory_bytes: args.memory_limit,
        ..Limits::default()
    };
    // Its own task, so that a panic inside wasmtime-wizer is reported as an error, not a crash.
    let size = bytes.len();
    let pre_initializing = Arc::clone(&engine);
    let snapshot =
        tokio::spawn(async move { pre_initializing.pre_initialize(&bytes, &limits).await })
            .await
            .map_err(|failure| {
                Problem::Input(format!(
                    "pre-initialising {} failed inside wasmtime-wizer: {failure}",
                    args.check.display()
                ))
            })?
            .map_err(Problem::Unusable)?;
    let check = engine.load(&snapshot).map_err(Problem::Unusable)?;
    input::write(&args.output, &snapshot)?;
    println!(
        "{}: pre-initialised ({} -> {} bytes), sha256 {}",
        args.output.display(),
        size,
        snapshot.len(),
        check.info().digest
    );
    Ok(EXIT_PROCEED)
}
