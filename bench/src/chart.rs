//! Small SVG charts drawn by the bench binary itself (no plotting dependency): line charts
//! of series over a shared x axis, and horizontal bars with a goal line. The files are
//! plain SVG 1.1, readable on GitHub and in any browser.

use std::fmt::Write as _;
use std::path::Path;

/// One named series of (x, y) points.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

const W: f64 = 760.0;
const H: f64 = 360.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
const COLOURS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];

/// "Nice" tick values covering `0..=max`.
fn ticks(max: f64) -> Vec<f64> {
    if max <= 0.0 || !max.is_finite() {
        return vec![0.0, 1.0];
    }
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let n = (max / step).ceil() as usize;
    (0..=n).map(|i| i as f64 * step).collect()
}

fn label(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn header(out: &mut String, title: &str) {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12"><rect width="{W}" height="{H}" fill="white"/><text x="{}" y="22" font-size="15" font-weight="bold">{}</text>"#,
        LEFT,
        escape(title)
    );
}

/// A line chart of `series`, y from 0, written to `path`.
pub fn lines(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> std::io::Result<()> {
    let x_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(0.0, f64::max);
    let y_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    let (xt, yt) = (ticks(x_max), ticks(y_max));
    let (x_top, y_top) = (*xt.last().unwrap_or(&1.0), *yt.last().unwrap_or(&1.0));
    let pw = W - LEFT - RIGHT;
    let ph = H - TOP - BOTTOM;
    let px = |x: f64| LEFT + x / x_top * pw;
    let py = |y: f64| TOP + ph - y / y_top * ph;
    let mut out = String::new();
    header(&mut out, title);
    for &t in &yt {
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" x2="{}" y1="{y}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
            LEFT + pw,
            LEFT - 6.0,
            py(t) + 4.0,
            label(t),
            y = py(t)
        );
    }
    for &t in &xt {
        let _ = write!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            px(t),
            TOP + ph + 16.0,
            label(t)
        );
    }
    let _ = write!(
        out,
        r##"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#888"/><text x="{}" y="{}" text-anchor="middle">{}</text><text transform="translate(16 {}) rotate(-90)" text-anchor="middle">{}</text>"##,
        LEFT + pw / 2.0,
        H - 12.0,
        escape(x_label),
        TOP + ph / 2.0,
        escape(y_label)
    );
    for (k, s) in series.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        let pts: Vec<String> = s
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = write!(
            out,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="1.6" points="{}"/><rect x="{}" y="{}" width="14" height="3" fill="{colour}"/><text x="{}" y="{}">{}</text>"#,
            pts.join(" "),
            LEFT + pw + 12.0,
            TOP + 10.0 + k as f64 * 20.0,
            LEFT + pw + 32.0,
            TOP + 14.0 + k as f64 * 20.0,
            escape(&s.name)
        );
    }
    out.push_str("</svg>\n");
    std::fs::write(path, out)
}

/// Horizontal bars of `bars` (label, value) with a dashed goal line at `goal`.
pub fn bars(
    path: &Path,
    title: &str,
    x_label: &str,
    bars: &[(String, f64)],
    goal: f64,
) -> std::io::Result<()> {
    let x_max = bars.iter().map(|b| b.1).fold(goal, f64::max) * 1.05;
    let left = 330.0;
    let pw = W - left - 40.0;
    let row = 28.0;
    let h = TOP + bars.len() as f64 * row + BOTTOM;
    let px = |x: f64| left + x / x_max * pw;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" viewBox="0 0 {W} {h}" font-family="sans-serif" font-size="12"><rect width="{W}" height="{h}" fill="white"/><text x="20" y="22" font-size="15" font-weight="bold">{}</text>"#,
        escape(title)
    );
    for (k, (name, v)) in bars.iter().enumerate() {
        let y = TOP + k as f64 * row;
        let colour = COLOURS[k % COLOURS.len()];
        let _ = write!(
            out,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text><rect x="{left}" y="{}" width="{:.1}" height="{}" fill="{colour}"/><text x="{}" y="{}">{:.3}</text>"#,
            left - 8.0,
            y + row / 2.0 + 4.0,
            escape(name),
            y + 5.0,
            px(*v) - left,
            row - 10.0,
            px(*v) + 4.0,
            y + row / 2.0 + 4.0,
            v
        );
    }
    let bottom = TOP + bars.len() as f64 * row;
    let _ = write!(
        out,
        r##"<line x1="{g}" x2="{g}" y1="{TOP}" y2="{bottom}" stroke="#333" stroke-dasharray="4 3"/><text x="{g}" y="{}" text-anchor="middle">goal {}</text><text x="{}" y="{}" text-anchor="middle">{}</text>"##,
        bottom + 16.0,
        label(goal),
        left + pw / 2.0,
        bottom + 36.0,
        escape(x_label),
        g = px(goal)
    );
    out.push_str("</svg>\n");
    std::fs::write(path, out)
}
