//! Fuzz target `config`: the body lives in `baton_core::fuzzing::config`, which the stable test
//! run also exercises.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    baton_core::fuzzing::config(data);
});
