//! Fuzz target `call_sequence`: the body lives in `baton_core::fuzzing::call_sequence`, which the stable test
//! run also exercises. The fuzz target supplies the start instant (core reads no clock).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    baton_core::fuzzing::call_sequence(data, std::time::Instant::now());
});
