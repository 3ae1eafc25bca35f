//! `preflight`: run, inspect and benchmark preflight checks (WebAssembly components) on a laptop, and run the
//! operator that gates Kubernetes objects with them.

mod cli;

use clap::Parser;
use std::process::ExitCode;

/// The image's binary, linked statically against musl, allocates with mimalloc. musl's allocator serialises
/// every thread on one lock and hands freed memory back with `munmap` at once (a TLB shootdown on each core):
/// with it, the image ran a third of the glibc build's checks/s with 64 evaluations in flight, and an
/// operator with 50 checks took twice as long to gate 5,000 objects (docs/performance.md, "The image's
/// allocator"). glibc builds keep glibc's allocator, which was as fast and used less memory.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Has mimalloc return freed pages to the system at once, unless `MIMALLOC_PURGE_DELAY` says otherwise.
/// Its default delays that by a second and purges only when the thread allocates again, so an idle
/// operator kept what compiling its checks had freed: 244 MiB against 115–134 MiB after loading one Go check,
/// and a peak of 218 MiB against 179–185 with 50 checks (docs/performance.md).
#[cfg(target_env = "musl")]
fn return_freed_memory_at_once() {
    /// `mi_option_purge_delay` in mimalloc 3's `mi_option_e`, which libmimalloc-sys 0.1.49 names no
    /// constant for (both pinned in host/cli/Cargo.toml).
    const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: mi_option_set stores a value in mimalloc's option table; it takes no pointer and any
        // thread may call it at any time.
        unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, 0) }
    }
}

fn main() -> ExitCode {
    #[cfg(target_env = "musl")]
    return_freed_memory_at_once();
    let args = cli::Cli::parse();
    if !args.is_long_running() {
        end_quietly_on_a_closed_pipe();
    }
    let (json, default_level) = args.logging();
    let directives = std::env::var("RUST_LOG").ok().map(|text| {
        let (stable, renamed) = stable_targets(&text);
        if renamed {
            eprintln!(
                "note: RUST_LOG names preflight::operator or preflight::engine, the log targets of releases \
                 before 0.1; they are read as preflight_operator and preflight_engine"
            );
        }
        stable
    });
    let filter = directives
        .and_then(|text| tracing_subscriber::EnvFilter::try_new(text).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new(default_level));
    let logs = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(colours_on_stderr())
        .with_env_filter(filter);
    if json {
        logs.json().init();
    } else {
        logs.init();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::from(cli::EXIT_USAGE);
        }
    };
    ExitCode::from(runtime.block_on(cli::execute(args)))
}

/// Whether text logs are coloured: only on a terminal (a file, a pipe and `kubectl logs` get plain text),
/// and not when `NO_COLOR` is set to a non-empty value (no-color.org).
fn colours_on_stderr() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty())
}

/// The log targets a user filters on, kept stable (docs/operator.md): `preflight_operator` (the operator:
/// controllers, check loading, pause switches), `preflight_engine` (loading and running checks),
/// `preflight` (this command) and `preflight::check` (the lines checks log). Earlier releases logged the
/// first two as `preflight::operator` and `preflight::engine`: `RUST_LOG` directives written for those are
/// rewritten, and the second value says whether any was.
fn stable_targets(directives: &str) -> (String, bool) {
    let mut renamed = false;
    let rewritten = directives
        .split(',')
        .map(|directive| {
            for (old, new) in [
                ("preflight::operator", "preflight_operator"),
                ("preflight::engine", "preflight_engine"),
            ] {
                if let Some(rest) = directive.trim().strip_prefix(old) {
                    renamed = true;
                    return format!("{new}{rest}");
                }
            }
            directive.to_owned()
        })
        .collect::<Vec<_>>()
        .join(",");
    (rewritten, renamed)
}

/// A command whose output is piped into a reader that stops early (`preflight inspect check.wasm | head -3`)
/// ends as other Unix tools do, by SIGPIPE, instead of panicking on the failed write: Rust ignores SIGPIPE
/// by default. Not for the operator, which must outlive a closed log pipe.
#[cfg(unix)]
fn end_quietly_on_a_closed_pipe() {
    // SAFETY: setting a signal's disposition to its default before any thread is started touches no Rust
    // state; the only effect is that a write to a closed pipe ends the process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(not(unix))]
fn end_quietly_on_a_closed_pipe() {}

#[cfg(test)]
mod tests {
    use super::stable_targets;

    #[test]
    fn old_log_targets_are_read_as_the_stable_ones() {
        assert_eq!(
            stable_targets("info,preflight::operator::controllers=debug,preflight::check=debug"),
            (
                "info,preflight_operator::controllers=debug,preflight::check=debug".to_owned(),
                true
            )
        );
        assert_eq!(
            stable_targets("warn,preflight::engine=trace"),
            ("warn,preflight_engine=trace".to_owned(), true)
        );
        assert_eq!(
            stable_targets("info,preflight_operator=debug"),
            ("info,preflight_operator=debug".to_owned(), false)
        );
    }
}
