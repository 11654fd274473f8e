//! Keep-alive benchmark (written below).
fn main() {}
