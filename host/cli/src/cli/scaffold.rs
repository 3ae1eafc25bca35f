//! `preflight scaffold`: a new check project in one of the guest languages, which builds with that
//! language's pinned toolchain (`sh build.sh`) and passes its own fixtures (`preflight test`) as created.
//!
//! The templates are `host/cli/scaffold/<language>/` plus a shared `fixtures.yaml`, with `{{name}}` (the
//! project directory's name), `{{crate}}` (the same with `_` for `-`), `{{find_tool}}` (the shell function
//! in `find-tool.sh` by which a build script finds the tools the repository's setup installed) and
//! `{{preflight}}` (this binary's path, quoted for the shell: C and Go builds run `preflight componentize`,
//! Go builds `preflight snapshot`) filled in. The SDK of every language but Rust is copied into the project
//! from this binary, with the WIT it is built against (for C, the bindings generated from it), so that the
//! project builds with nothing but its toolchain and this binary, and matches the contract versions it
//! serves. A Rust project gets the `preflight-guest` crate the same way (in `preflight-sdk/`, with the
//! contract it is built against), or depends on a checkout given with `--sdk`, by a path relative to the
//! project.

use super::{Problem, ScaffoldArgs};
use clap::ValueEnum;
use include_dir::{Dir, include_dir};
use std::path::Path;

/// The per-language templates and the shared fixtures.
static TEMPLATES: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/scaffold");
/// The Python SDK package (`preflight/`).
static PYTHON_SDK: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../../guest-sdk/python/preflight");
/// The JavaScript SDK module.
static JAVASCRIPT_SDK: &str = include_str!("../../../../guest-sdk/javascript/preflight.js");
/// The Go SDK module (its committed bindings included).
static GO_SDK: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../../guest-sdk/go");
/// The C SDK's sources, with the bindings of the guest world (`bindings/`).
static C_SDK: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../../guest-sdk/c");
/// The guest world Python and JavaScript checks are built for, with the contract and WASI as its deps.
static GUEST_WIT: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../../guest-sdk/wit");
/// The newest contract, which Go and C checks are built for directly.
static CONTRACT: &str = include_str!("../../../../wit/v0.2/preflight.wit");
/// The Rust SDK's sources (`preflight-guest`) and those of the object-identity crate it uses.
static RUST_SDK: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../../guest-sdk/src");
static IDENTITY_SDK: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../../guest-sdk/identity/src");
/// The Rust SDK's build script (it refuses a build that would link a core module).
static RUST_SDK_BUILD: &str = include_str!("../../../../guest-sdk/build.rs");
/// The manifests of the copied Rust SDK: the workspace's settings written out, since the copy has none.
const RUST_SDK_MANIFEST: &str = concat!(
    "[package]\nname = \"preflight-guest\"\nversion = \"",
    env!("CARGO_PKG_VERSION"),
    "\"\nedition = \"2024\"\nlicense = \"Apache-2.0\"\npublish = false\n\n[dependencies]\n\
     wit-bindgen = { version = \"0.61\", default-features = false, features = [\"macros\", \"realloc\"] }\n\
     serde = { version = \"1\", features = [\"derive\"] }\nserde_json = \"1\"\n\
     preflight-object-identity = { path = \"identity\" }\n\n\
     [features]\ndefault = [\"allocator\"]\nallocator = [\"dep:talc\"]\n\n\
     [target.'cfg(target_arch = \"wasm32\")'.dependencies]\nwasip2 = \"1\"\n\n\
     [target.'cfg(all(target_arch = \"wasm32\", target_os = \"unknown\"))'.dependencies]\n\
     talc = { version = \"5.1\", optional = true }\n"
);
const IDENTITY_MANIFEST: &str = concat!(
    "[package]\nname = \"preflight-object-identity\"\nversion = \"",
    env!("CARGO_PKG_VERSION"),
    "\"\nedition = \"2024\"\nlicense = \"Apache-2.0\"\npublish = false\n\n[dependencies]\nserde_json = \"1\"\n"
);

/// A guest language `preflight scaffold` can create a project in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Language {
    Rust,
    Python,
    #[value(alias = "javascript")]
    Js,
    Go,
    C,
}

impl Language {
    /// The template directory's name.
    fn template(self) -> &'static str {
        match self {
            Self::Rust => "rust",
            Self::Python => "python",
            Self::Js => "javascript",
            Self::Go => "go",
            Self::C => "c",
        }
    }
}

pub fn scaffold(args: ScaffoldArgs) -> Result<(), Problem> {
    let directory = &args.directory;
    let name = directory
        .file_name()
        .and_then(|name| name.to_str())
        .filter(|name| valid_name(name))
        .ok_or_else(|| {
            Problem::Input(format!(
                "{}: the project's name (its directory's) must be lowercase letters, digits and `-`, \
                 starting with a letter",
                directory.display()
            ))
        })?;
    if directory
        .read_dir()
        .is_ok_and(|mut entries| entries.next().is_some())
    {
        return Err(Problem::Input(format!(
            "{} exists and is not empty",
            directory.display()
        )));
    }
    let sdk = match &args.sdk {
        Some(checkout) => {
            let crate_dir = checkout.join("guest-sdk");
            if !crate_dir.join("Cargo.toml").is_file() {
                return Err(Problem::Input(format!(
                    "--sdk {}: not a checkout of this project (no guest-sdk/Cargo.toml)",
                    checkout.display()
                )));
            }
            format!(
                "{{ path = {:?} }}",
                relative_to(directory, &crate_dir).display().to_string()
            )
        }
        None => "{ path = \"preflight-sdk/guest-sdk\" }".to_owned(),
    };
    // How a build script finds a tool the preflight repository's setup installed (one copy for every
    // language's build.sh).
    let find_tool = TEMPLATES
        .get_file("find-tool.sh")
        .and_then(|file| file.contents_utf8())
        .expect("the find-tool fragment is text")
        .trim_end();
    // Where a Go build finds this binary (for `preflight snapshot`) when PATH does not hold one.
    let preflight = std::env::current_exe()
        .map(|path| shell_quoted(&path.display().to_string()))
        .unwrap_or_default();
    let fill = |text: &str| {
        text.replace("{{find_tool}}", find_tool)
            .replace("{{preflight}}", &preflight)
            .replace("{{name}}", name)
            .replace("{{crate}}", &name.replace('-', "_"))
            .replace("{{preflight_guest}}", &sdk)
    };
    let language = args.lang;
    let template = TEMPLATES
        .get_dir(language.template())
        .expect("every language has a template");
    write_dir(template, directory, &fill)?;
    let fixtures = TEMPLATES
        .get_file("fixtures.yaml")
        .and_then(|file| file.contents_utf8())
        .expect("the fixtures template is text");
    write(&directory.join("fixtures.yaml"), fill(fixtures).as_bytes())?;
    match language {
        Language::Rust if args.sdk.is_none() => {
            let sdk = directory.join("preflight-sdk");
            write_dir(&RUST_SDK, &sdk.join("guest-sdk/src"), &str::to_owned)?;
            write(
                &sdk.join("guest-sdk/Cargo.toml"),
                RUST_SDK_MANIFEST.as_bytes(),
            )?;
            write(&sdk.join("guest-sdk/build.rs"), RUST_SDK_BUILD.as_bytes())?;
            write_dir(
                &IDENTITY_SDK,
                &sdk.join("guest-sdk/identity/src"),
                &str::to_owned,
            )?;
            write(
                &sdk.join("guest-sdk/identity/Cargo.toml"),
                IDENTITY_MANIFEST.as_bytes(),
            )?;
            write(&sdk.join("wit/v0.2/preflight.wit"), CONTRACT.as_bytes())?;
        }
        Language::Rust => {}
        Language::Python => {
            write_dir(&PYTHON_SDK, &directory.join("preflight"), &str::to_owned)?;
            write_dir(&GUEST_WIT, &directory.join("wit"), &str::to_owned)?;
        }
        Language::Js => {
            write(&directory.join("preflight.js"), JAVASCRIPT_SDK.as_bytes())?;
            write_dir(&GUEST_WIT, &directory.join("wit"), &str::to_owned)?;
        }
        Language::Go => {
            write_dir(&GO_SDK, &directory.join("preflight-sdk"), &str::to_owned)?;
            let sums = GO_SDK
                .get_file("go.sum")
                .and_then(|file| file.contents_utf8())
                .unwrap_or_default();
            write(&directory.join("go.sum"), sums.as_bytes())?;
            // The guest world: the contract and wasi:http, for the SDK's HTTP helper.
            write_dir(&GUEST_WIT, &directory.join("wit"), &str::to_owned)?;
        }
        Language::C => {
            write_dir(&C_SDK, &directory.join("preflight-sdk"), &str::to_owned)?;
            write_dir(&GUEST_WIT, &directory.join("wit"), &str::to_owned)?;
        }
    }
    println!(
        "created {} ({:?}): build it with `sh {}/build.sh`, then `preflight test --check {}/{name}.wasm {}/fixtures.yaml`",
        directory.display(),
        language.template(),
        directory.display(),
        directory.display(),
        directory.display(),
    );
    Ok(())
}

/// `text` as one word of a POSIX shell: in single quotes, each single quote closed, escaped and reopened.
fn shell_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// `path` as seen from `from` (both made absolute): `../preflight/guest-sdk`, so that a project and the
/// checkout it depends on can move together.
fn relative_to(from: &Path, path: &Path) -> std::path::PathBuf {
    let (Ok(from), Ok(path)) = (std::path::absolute(from), std::path::absolute(path)) else {
        return path.to_owned();
    };
    let common = from
        .components()
        .zip(path.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut relative = std::path::PathBuf::new();
    for _ in from.components().skip(common) {
        relative.push("..");
    }
    relative.extend(path.components().skip(common));
    relative
}

/// Lowercase letters, digits and `-`, starting with a letter: a valid crate, Go module, npm package and
/// ConfigMap name alike.
fn valid_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Writes every file of `dir` under `target`, text passed through `fill`; skips Python's bytecode caches.
fn write_dir(dir: &Dir<'_>, target: &Path, fill: &dyn Fn(&str) -> String) -> Result<(), Problem> {
    for file in dir.files() {
        let path = target.join(file.path().strip_prefix(dir.path()).unwrap_or(file.path()));
        match file.contents_utf8() {
            Some(text) => write(&path, fill(text).as_bytes())?,
            None => write(&path, file.contents())?,
        }
        if path.extension().is_some_and(|extension| extension == "sh") {
            make_executable(&path)?;
        }
    }
    for sub in dir.dirs() {
        if sub.path().ends_with("__pycache__") {
            continue;
        }
        let relative = sub.path().strip_prefix(dir.path()).unwrap_or(sub.path());
        write_dir(sub, &target.join(relative), fill)?;
    }
    Ok(())
}

fn write(path: &Path, contents: &[u8]) -> Result<(), Problem> {
    let problem = |error: std::io::Error| Problem::Input(format!("{}: {error}", path.display()));
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(problem)?;
    }
    std::fs::write(path, contents).map_err(problem)
}

fn make_executable(path: &Path) -> Result<(), Problem> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|error| Problem::Input(format!("{}: {error}", path.display())))
}
