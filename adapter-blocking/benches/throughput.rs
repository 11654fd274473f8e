//! Placeholder (the benchmark follows).
fn main() {}
