//! PNG plots with plotters' bitmap backend (no system libraries):
//! the latency tail (CCDF) per policy, and per-worker share of picks over time.
//!
//! Text needs a font. Nothing is bundled: at the first plot a TrueType font
//! is looked up at common system paths (DejaVu / Liberation) and registered
//! with plotters' `ab_glyph` backend; without one, plots are drawn without
//! captions and labels (the Markdown report names the colours).

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;

use crate::run_summary::{percentile_sorted, shares};
use crate::sim::RunRecord;

/// Plot size, pixels.
pub const SIZE: (u32, u32) = (800, 500);

/// The colour of policy `name` (its row's in [`crate::arms::ARMS`]).
pub fn colour(name: &str) -> RGBColor {
    let (r, g, b) = crate::arms::spec(name).map_or(crate::arms::ARMS[0].colour, |a| a.colour);
    RGBColor(r, g, b)
}

const FONT_PATHS: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

/// Registers a system font once; whether text can be drawn.
fn fonts() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        for p in FONT_PATHS {
            if let Ok(bytes) = std::fs::read(p) {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        false
    })
}

type PlotResult = Result<(), String>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Smallest tail fraction the latency plot shows (p99.99).
pub const TAIL_MIN: f64 = 1e-4;

/// The latency CCDF of `sorted` (ascending latencies, ms): points
/// `(latency, fraction of requests slower)` from the median down to
/// [`TAIL_MIN`], denser in the tail, latencies at least `lo`.
pub fn ccdf_points(sorted: &[f64], lo: f64) -> Vec<(f64, f64)> {
    if sorted.is_empty() {
        return Vec::new();
    }
    (0..=400)
        .map(|i| {
            // Tail fractions from 0.5 down to TAIL_MIN, log-spaced.
            let tail = 0.5 * (TAIL_MIN / 0.5).powf(f64::from(i) / 400.0);
            (percentile_sorted(sorted, 1.0 - tail).max(lo), tail)
        })
        .collect()
}

/// The latency axis of the CCDF, ms: from the lowest median (at least
/// 0.01) to the highest latency (at least 10× that). A run where no
/// request finished has no latencies; with none at all the axis is
/// 0.01..0.1 and the plot is empty, not infinite.
fn latency_axis(sorted: &[(String, Vec<f64>)]) -> (f64, f64) {
    let lo = sorted
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(_, v)| percentile_sorted(v, 0.5))
        .filter(|x| x.is_finite())
        .fold(f64::INFINITY, f64::min);
    let lo = if lo.is_finite() { lo.max(0.01) } else { 0.01 };
    let hi = sorted
        .iter()
        .filter_map(|(_, v)| v.last())
        .copied()
        .filter(|x| x.is_finite())
        .fold(0.0, f64::max)
        .max(lo * 10.0);
    (lo, hi)
}

/// Latency CCDF of each run, written to `path`: the fraction of requests
/// slower than x, both axes log-scaled, so that p99 (10⁻²) and p99.9
/// (10⁻³) are visible; grey guides at those two; every other policy's line
/// dashed, so overlapping lines stay distinguishable.
pub fn latency_cdf(path: &Path, title: &str, runs: &[(String, RunRecord)]) -> PlotResult {
    let text = fonts();
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let sorted: Vec<(String, Vec<f64>)> = runs
        .iter()
        .map(|(n, r)| {
            let mut v = r.latencies_ms.clone();
            v.sort_by(f64::total_cmp);
            (n.clone(), v)
        })
        .collect();
    let (lo, hi) = latency_axis(&sorted);
    let mut b = ChartBuilder::on(&root);
    b.margin(10);
    if text {
        b.caption(title, ("sans-serif", 18))
            .x_label_area_size(35)
            .y_label_area_size(55);
    }
    let mut chart = b
        .build_cartesian_2d((lo..hi).log_scale(), (TAIL_MIN..0.5f64).log_scale())
        .map_err(err)?;
    if text {
        chart
            .configure_mesh()
            .x_desc("latency, ms (log)")
            .y_desc("fraction of requests slower (log)")
            .y_label_formatter(&|y| format!("{y:.0e}"))
            .draw()
            .map_err(err)?;
    } else {
        chart
            .configure_mesh()
            .disable_x_mesh()
            .disable_y_mesh()
            .draw()
            .map_err(err)?;
    }
    let guide = RGBColor(90, 90, 90);
    for (q, label) in [(1e-2, "p99 (10^-2)"), (1e-3, "p99.9 (10^-3)")] {
        let s = chart
            .draw_series(DashedLineSeries::new(
                [(lo, q), (hi, q)],
                2,
                6,
                guide.stroke_width(1),
            ))
            .map_err(err)?;
        if text {
            s.label(label).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 4, y)], guide.stroke_width(1))
            });
        }
    }
    for (k, (name, v)) in sorted.iter().enumerate() {
        let pts = ccdf_points(v, lo);
        if pts.is_empty() {
            continue;
        }
        let c = colour(name);
        let style = c.stroke_width(2);
        let s = if k % 2 == 1 {
            chart
                .draw_series(DashedLineSeries::new(pts, 8, 4, style))
                .map_err(err)?
        } else {
            chart
                .draw_series(LineSeries::new(pts, style))
                .map_err(err)?
        };
        if text {
            let dashed = k % 2 == 1;
            s.label(name.as_str()).legend(move |(x, y)| {
                let end = if dashed { x + 10 } else { x + 20 };
                PathElement::new(vec![(x, y), (end, y)], c.stroke_width(2))
            });
        }
    }
    if text {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
    }
    root.present().map_err(err)
}

/// The y-axis top of every panel of [`shares_over_time`]: the largest
/// share any worker reached in any run, + 5% (at least 0.05, at most 1.05),
/// so that panels compare at a glance.
pub fn shares_y_max(runs: &[(String, RunRecord)]) -> f64 {
    runs.iter()
        .flat_map(|(_, r)| shares(&r.window_picks))
        .flatten()
        .fold(0.0, f64::max)
        .clamp(0.05, 1.0)
        * 1.05
}

/// Per-worker share of picks over time, one panel per run: the impaired
/// worker in red, the others in grey, the fault window (`fault_s`, s)
/// shaded, one y-scale ([`shares_y_max`]) across panels, axes labelled.
pub fn shares_over_time(
    path: &Path,
    title: &str,
    runs: &[(String, RunRecord)],
    impaired: Option<usize>,
    fault_s: Option<(f64, f64)>,
) -> PlotResult {
    let text = fonts();
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let root = if text {
        root.titled(title, ("sans-serif", 16)).map_err(err)?
    } else {
        root
    };
    let cols = 3.min(runs.len().max(1));
    let rows = runs.len().div_ceil(cols).max(1);
    let panels = root.split_evenly((rows, cols));
    let ymax = shares_y_max(runs);
    for ((name, rec), area) in runs.iter().zip(panels.iter()) {
        let sh = shares(&rec.window_picks);
        let t_end = sh.len() as f64 * rec.window_ms / 1000.0;
        let mut b = ChartBuilder::on(area);
        b.margin(6);
        if text {
            b.caption(name.as_str(), ("sans-serif", 13))
                .x_label_area_size(28)
                .y_label_area_size(40);
        }
        let mut chart = b
            .build_cartesian_2d(0.0..t_end.max(1e-3), 0.0..ymax)
            .map_err(err)?;
        if let Some((from, to)) = fault_s {
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(from.max(0.0), 0.0), (to.min(t_end), ymax)],
                    RGBColor(255, 215, 215).filled(),
                )))
                .map_err(err)?;
        }
        if text {
            chart
                .configure_mesh()
                .x_labels(4)
                .y_labels(4)
                .x_desc("time, s")
                .y_desc("share of picks")
                .label_style(("sans-serif", 10))
                .axis_desc_style(("sans-serif", 10))
                .draw()
                .map_err(err)?;
        } else {
            chart.configure_mesh().disable_mesh().draw().map_err(err)?;
        }
        let n = sh.first().map_or(0, Vec::len);
        let mut order: Vec<usize> = (0..n).filter(|&i| Some(i) != impaired).collect();
        order.extend(impaired.filter(|&i| i < n));
        for i in order {
            let pts: Vec<(f64, f64)> = sh
                .iter()
                .enumerate()
                .map(|(w, s)| ((w as f64 + 0.5) * rec.window_ms / 1000.0, s[i]))
                .collect();
            let style = if Some(i) == impaired {
                RED.stroke_width(2)
            } else {
                RGBColor(150, 150, 150).stroke_width(1)
            };
            chart
                .draw_series(LineSeries::new(pts, style))
                .map_err(err)?;
        }
    }
    root.present().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(latencies_ms: Vec<f64>, window_picks: Vec<Vec<u32>>) -> (String, RunRecord) {
        let rec = RunRecord {
            latencies_ms,
            window_picks,
            window_ms: 1_000.0,
            ..RunRecord::default()
        };
        ("p".to_string(), rec)
    }

    #[test]
    fn the_tail_plot_runs_from_the_median_to_p99_99_through_p99_and_p99_9() {
        let v: Vec<f64> = (1..=100_000).map(f64::from).collect();
        let pts = ccdf_points(&v, 0.01);
        assert_eq!(pts.len(), 401);
        assert_eq!(pts[0], (percentile_sorted(&v, 0.5), 0.5));
        assert!((pts[400].1 - TAIL_MIN).abs() < 1e-12);
        for (q, tail) in [(0.99, 1e-2f64), (0.999, 1e-3)] {
            let p = pts
                .iter()
                .min_by(|a, b| {
                    (a.1.ln() - tail.ln())
                        .abs()
                        .total_cmp(&(b.1.ln() - tail.ln()).abs())
                })
                .copied()
                .unwrap_or_default();
            let want = percentile_sorted(&v, q);
            assert!((p.0 - want).abs() / want < 0.02, "{tail}: {p:?} vs {want}");
        }
        assert!(pts.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 > w[1].1));
        assert!(ccdf_points(&[], 1.0).is_empty());
    }

    #[test]
    fn a_run_where_nothing_finished_plots_on_a_finite_axis() {
        let none = [("a".to_owned(), Vec::new()), ("b".to_owned(), Vec::new())];
        assert_eq!(latency_axis(&none), (0.01, 0.1));
        let some = [
            ("a".to_owned(), vec![2.0, 4.0, 50.0]),
            ("b".to_owned(), Vec::new()),
        ];
        assert_eq!(latency_axis(&some), (4.0, 50.0));
        let dir = std::env::temp_dir().join(format!("plot-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let runs = [("a".to_owned(), RunRecord::default())];
        latency_cdf(&dir.join("cdf.png"), "empty", &runs).expect("an empty plot");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn every_share_panel_has_the_same_y_scale() {
        // One run peaks at a 0.9 share, the other at 0.5: both panels to 0.945.
        let runs = [
            run(vec![1.0], vec![vec![9, 1], vec![5, 5]]),
            run(vec![1.0], vec![vec![5, 5], vec![4, 6]]),
        ];
        assert!((shares_y_max(&runs) - 0.9 * 1.05).abs() < 1e-12);
        assert!((shares_y_max(&runs[1..]) - 0.6 * 1.05).abs() < 1e-12);
    }
}
