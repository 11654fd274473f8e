//! Fuzz target `config`: the body lives in `baton_core::fuzzing::config`, which the stable test
//! run also exercises. The fuzz target supplies the start instant (core reads no clock).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    baton_core::fuzzing::config(data, std::time::Instant::now());
});
