//! A component whose initialisation spins forever: pre-initialising it must end at its time limit with an
//! error that says so, not hang the build.

wit_bindgen::generate!({ world: "initializer", path: "wit" });

struct Endless;

impl Guest for Endless {
    fn wizer_initialize() {
        let mut turns = 0u64;
        loop {
            turns = std::hint::black_box(turns.wrapping_add(1));
        }
    }
}

export!(Endless);
