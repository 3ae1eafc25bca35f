//! The OCI crate against a real registry (the CNCF distribution registry, built from Go modules), and its
//! dependency boundary.

mod boundary;
mod registry;
mod signatures;
