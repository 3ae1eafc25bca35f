//! A perfectly good component of another world: it greets, it does not check.

wit_bindgen::generate!({ world: "greeter", path: "wit" });

struct Greeter;

impl exports::example::greeter::greet::Guest for Greeter {
    fn hello(name: String) -> String {
        format!("hello, {name}")
    }
}

export!(Greeter);
