//! Keeps the benchmark binary from rotting: `bench --quick` must finish, print a row for
//! every scenario and contender, and draw its charts. No timing is asserted (CI machines
//! are shared).

use std::process::Command;

#[test]
fn quick_run_prints_every_scenario_row() {
    let out = Command::new(env!("CARGO_BIN_EXE_bench"))
        .arg("--quick")
        .output()
        .expect("run bench --quick");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "bench --quick failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = [
        ("1 healthy", "plain reqwest"),
        ("1 healthy", "baton-tokio"),
        ("1 healthy", "plain reqwest + 30 s tokio timeout"),
        ("1 healthy", "plain hyper-util Client, same request bytes"),
        ("1 healthy", "plain hyper-util Client, plain request"),
        ("1 healthy", "baton-tower over that hyper-util Client"),
        ("1 healthy", "stock ureq Agent, same request bytes"),
        ("1 healthy", "stock ureq Agent, plain request"),
        ("1 healthy", "baton-blocking"),
        ("1 healthy", "bare hyper on async-std, same request bytes"),
        ("1 healthy", "baton-async-std on async-std"),
        ("1 healthy", "bare hyper on smol, same request bytes"),
        ("1 healthy", "baton-async-std on smol"),
        ("2 black-holed primary", "plain reqwest to the backup"),
        ("2 black-holed primary", "baton-tokio, healthy primary"),
        ("2 black-holed primary", "baton-tokio"),
        ("2 black-holed primary", "baton-tokio, 8 tasks"),
        ("2 black-holed primary", "hand-written try A then B"),
        ("2 black-holed primary", "reqwest-retry (at the primary)"),
        ("3 total outage (503)", "baton-tokio, budget on"),
        ("3 total outage (503)", "baton-tokio, budget off"),
        ("3 total outage (503)", "reqwest-retry, 2 retries"),
        (
            "1 healthy",
            "reqwest-retry over that reqwest Client (2 retries)",
        ),
        ("1 healthy", "plain reqwest, same request bytes"),
        ("3 total outage (503)", "tower retry, 2 retries + TpsBudget"),
        ("4 slow primary (10 %)", "plain reqwest to the backup"),
        ("4 slow primary (10 %)", "baton-tokio, hedging off"),
        ("4 slow primary (10 %)", "baton-tokio, hedging on"),
        (
            "5 shared engine",
            "baton-core, consecutive rule, budget off",
        ),
        ("5 shared engine", "baton-core, consecutive rule, budget on"),
        (
            "5 shared engine",
            "baton-core, failure-rate rule, budget off",
        ),
        (
            "6 healthy over HTTP/2",
            "plain reqwest over HTTP/2, same request bytes",
        ),
        ("6 healthy over HTTP/2", "baton-tokio over HTTP/2"),
        (
            "6 healthy over HTTP/2",
            "bare hyper HTTP/2 on async-std, same request bytes",
        ),
        (
            "6 healthy over HTTP/2",
            "baton-async-std over HTTP/2 on async-std",
        ),
        (
            "6 healthy over HTTP/2",
            "baton-async-std over HTTP/2 on smol",
        ),
    ];
    for (scenario, contender) in rows {
        let prefix = format!("| {scenario} | {contender}");
        assert!(
            stdout.lines().any(|l| l.starts_with(&prefix)),
            "no row {prefix:?} in:\n{stdout}"
        );
    }
    let table_rows = stdout.lines().filter(|l| l.starts_with("| ")).count();
    // Header plus 51 rows (scenario 1: 5 reqwest and 3 hyper-util contenders and 3 per
    // other runtime, at two shapes), and 18 of scenario 6 (3 per runtime and shape).
    assert_eq!(table_rows, 70, "{stdout}");
    // A quick run draws its charts under target/ (a full run's are in docs/charts/).
    let charts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-charts");
    for name in [
        "blackhole_latency.svg",
        "outage_attempts.svg",
        "healthy_ratios.svg",
    ] {
        let svg = std::fs::read_to_string(charts.join(name)).unwrap_or_default();
        assert!(
            svg.starts_with("<svg") && (svg.contains("polyline") || svg.contains("<rect")),
            "{name}"
        );
    }
}

#[test]
fn allocation_counts_print_a_row_per_adapter() {
    let out = Command::new(env!("CARGO_BIN_EXE_allocs"))
        .arg("--quick")
        .output()
        .expect("run allocs --quick");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for adapter in [
        "baton-tokio",
        "baton-blocking",
        "baton-async-std",
        "baton-tower",
    ] {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&format!("| {adapter} |")))
            .unwrap_or_else(|| panic!("no row for {adapter}: {stdout}"));
        let cols: Vec<&str> = row.split('|').map(str::trim).collect();
        let (baton, raw): (f64, f64) = (cols[3].parse().unwrap(), cols[4].parse().unwrap());
        assert!(baton > 0.0 && raw > 0.0, "{row}");
    }
}
