//! Every vector through the core simulator.

use std::time::Duration;

use conformance::{check, run_sim, vectors};

#[test]
fn every_vector_passes_on_the_simulator() {
    let all = vectors();
    assert!(!all.is_empty());
    let mut failures = Vec::new();
    let (mut ran, mut skipped) = (0, 0);
    for v in &all {
        if !v.runs_on("sim") {
            skipped += 1;
            continue;
        }
        ran += 1;
        let v = &v.for_sim();
        match run_sim(v) {
            Err(e) => failures.push(format!("{}: {e}", v.name)),
            Ok(observed) => {
                if std::env::var_os("CONFORMANCE_DUMP").is_some() {
                    // For vector authors: what every call did, to write `expect` from.
                    for (i, o) in observed.iter().enumerate() {
                        println!(
                            "{} call {}: attempts {:?} status {:?} endpoint {:?} error {:?} stop {} executed {} elapsed {:?} body_error {:?}",
                            v.name,
                            i + 1,
                            o.attempts,
                            o.status,
                            o.endpoint,
                            o.error,
                            o.stop_reason,
                            o.may_have_executed,
                            o.elapsed,
                            o.body_error
                        );
                    }
                }
                for (i, (c, o)) in v.calls.iter().zip(&observed).enumerate() {
                    for bad in check(v, c, o, Duration::ZERO) {
                        failures.push(format!(
                            "{} [{}] call {}: {bad}",
                            v.name,
                            v.file.display(),
                            i + 1
                        ));
                    }
                }
            }
        }
    }
    println!("simulator: {ran} vectors ran, {skipped} not expressible on this path");
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn vector_names_are_unique() {
    let all = vectors();
    let mut names: Vec<&str> = all.iter().map(|v| v.name.as_str()).collect();
    names.sort();
    let n = names.len();
    names.dedup();
    assert_eq!(n, names.len());
}
