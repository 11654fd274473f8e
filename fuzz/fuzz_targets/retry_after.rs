//! Fuzz target `retry_after`: the body lives in `baton_core::fuzzing::retry_after`, which the stable test
//! run also exercises.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    baton_core::fuzzing::retry_after(data);
});
