//! Every vector through the core simulator.

use conformance::{check, run_sim, vectors, Slack};

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
                if observed.len() != v.calls.len() {
                    failures.push(format!(
                        "{}: {} calls, {} observed",
                        v.name,
                        v.calls.len(),
                        observed.len()
                    ));
                }
                for (i, (c, o)) in v.calls.iter().zip(&observed).enumerate() {
                    for bad in check(v, c, o, Slack::NONE) {
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
    assert!(ran > 0, "simulator: no vector ran");
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

#[test]
fn a_vector_naming_an_unknown_path_or_leaving_paths_out_unexplained_does_not_load() {
    let dir = std::env::temp_dir().join(format!("baton-vector-paths-{}", std::process::id()));
    let load = |paths: &str| {
        std::fs::create_dir_all(&dir).unwrap();
        let text = format!(
            "name = \"x\"\n{paths}\n[[endpoints]]\nid = \"a\"\n\n[[calls]]\nmethod = \"GET\"\nexpect.attempts = [[\"a\", \"response\"]]\n"
        );
        std::fs::write(dir.join("v.toml"), text).unwrap();
        let loaded = conformance::load_dir(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        loaded
    };
    let e = load("paths = [\"sim\", \"tokyo\"]\nwhy_not = \"a typo\"").unwrap_err();
    assert!(e.contains("unknown path \"tokyo\""), "{e}");
    let e = load("paths = [\"sim\"]").unwrap_err();
    assert!(e.contains("`why_not`"), "{e}");
    assert_eq!(
        load("paths = [\"sim\"]\nwhy_not = \"timing\"")
            .unwrap()
            .len(),
        1
    );
    assert_eq!(load("").unwrap().len(), 1);
}

/// The simulator users property-test their policies with (`baton_core::sim::Sim`) decides
/// every vector it can model as this runner's own simulator does, and so as every runtime
/// does: the same attempts, result, stop reason, error, `may_have_executed`, elapsed time,
/// and requests at each endpoint. Before, nothing held it to the vectors.
#[test]
fn the_core_simulator_decides_every_vector_as_the_runner_does() {
    let (mut ran, mut failures) = (0, Vec::new());
    for v in vectors().iter().filter(|v| v.runs_on("sim")) {
        let runner = run_sim(v).unwrap_or_else(|e| panic!("{}: {e}", v.name));
        let Some(core) = conformance::run_core_sim(v).unwrap_or_else(|e| panic!("{}: {e}", v.name))
        else {
            continue;
        };
        ran += 1;
        for (i, (r, (c, seen))) in runner.iter().zip(&core).enumerate() {
            let runner_seen: std::collections::BTreeMap<String, usize> = v
                .endpoints
                .iter()
                .map(|e| (e.id.clone(), r.seen.get(&e.id).map_or(0, Vec::len)))
                .collect();
            let fields = [
                (
                    "attempts",
                    format!("{:?}", r.attempts),
                    format!("{:?}", c.attempts),
                ),
                (
                    "status",
                    format!("{:?}", r.status),
                    format!("{:?}", c.status),
                ),
                (
                    "endpoint",
                    format!("{:?}", r.endpoint),
                    format!("{:?}", c.endpoint),
                ),
                ("error", format!("{:?}", r.error), format!("{:?}", c.error)),
                ("stop reason", r.stop_reason.clone(), c.stop_reason.clone()),
                (
                    "may_have_executed",
                    r.may_have_executed.to_string(),
                    c.may_have_executed.to_string(),
                ),
                (
                    "elapsed",
                    format!("{:?}", r.elapsed),
                    format!("{:?}", c.elapsed),
                ),
                ("requests", format!("{runner_seen:?}"), format!("{seen:?}")),
            ];
            for (field, want, got) in fields {
                if want != got {
                    failures.push(format!(
                        "{} call {}: {field}: runner {want}, core sim {got}",
                        v.name,
                        i + 1
                    ));
                }
            }
        }
    }
    println!("{ran} vectors through baton_core::sim::Sim");
    assert!(ran > 50, "only {ran} vectors ran");
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
