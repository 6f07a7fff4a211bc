//! PNG plots with plotters' bitmap backend (no system libraries):
//! latency CDF per policy, and per-worker share of picks over time.
//!
//! Text needs a font. Nothing is bundled: at the first plot a TrueType font
//! is looked up at common system paths (DejaVu / Liberation) and registered
//! with plotters' `ab_glyph` backend; without one, plots are drawn without
//! captions and labels (the Markdown report names the colours).

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;

use crate::metrics::{percentile_sorted, shares};
use crate::sim::RunRecord;

/// Plot size, pixels.
pub const SIZE: (u32, u32) = (800, 500);

/// Colours by policy index, in [`crate::policies::POLICIES`] order.
pub const COLOURS: [RGBColor; crate::policies::POLICIES.len()] = [
    RGBColor(228, 26, 28),   // round-robin: red
    RGBColor(255, 127, 0),   // random: orange
    RGBColor(55, 126, 184),  // p2c-least-request: blue
    RGBColor(152, 78, 163),  // p2c-peak-ewma: purple
    RGBColor(0, 90, 0),      // service: dark green
    RGBColor(128, 128, 128), // service-rules: grey
    RGBColor(77, 175, 74),   // rules-max: green
    RGBColor(0, 0, 0),       // rules-softmax: black
    RGBColor(0, 170, 170),   // rules-p2c: teal
    RGBColor(200, 160, 0),   // rules-prequal: gold
    RGBColor(166, 86, 40),   // model: brown
    RGBColor(247, 129, 191), // model-retrained: pink
];

/// The colour of policy `name`.
pub fn colour(name: &str) -> RGBColor {
    let i = crate::policies::POLICIES
        .iter()
        .position(|p| *p == name)
        .unwrap_or(0);
    COLOURS[i]
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

/// Latency CDF of each run, log-scale x (ms), written to `path`.
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
    let lo = sorted
        .iter()
        .filter_map(|(_, v)| v.first())
        .copied()
        .fold(f64::INFINITY, f64::min)
        .max(0.01);
    let hi = sorted
        .iter()
        .filter_map(|(_, v)| v.last())
        .copied()
        .fold(0.0, f64::max)
        .max(lo * 10.0);
    let mut b = ChartBuilder::on(&root);
    b.margin(10);
    if text {
        b.caption(title, ("sans-serif", 18))
            .x_label_area_size(35)
            .y_label_area_size(45);
    }
    let mut chart = b
        .build_cartesian_2d((lo..hi).log_scale(), 0.0..1.0f64)
        .map_err(err)?;
    if text {
        chart
            .configure_mesh()
            .x_desc("latency, ms (log)")
            .y_desc("fraction of requests")
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
    for (name, v) in &sorted {
        if v.is_empty() {
            continue;
        }
        // 400 points per curve, denser in the tail.
        let pts: Vec<(f64, f64)> = (0..=400)
            .map(|i| {
                let q = 1.0 - 10f64.powf(-4.0 * f64::from(i) / 400.0);
                (percentile_sorted(v, q).max(lo), q)
            })
            .collect();
        let c = colour(name);
        let s = chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))
            .map_err(err)?;
        if text {
            s.label(name.as_str()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
            });
        }
    }
    if text {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
    }
    root.present().map_err(err)
}

/// Per-worker share of picks over time, one panel per run: the impaired
/// worker in red, the others in grey.
pub fn shares_over_time(
    path: &Path,
    title: &str,
    runs: &[(String, RunRecord)],
    impaired: Option<usize>,
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
    for ((name, rec), area) in runs.iter().zip(panels.iter()) {
        let sh = shares(&rec.window_picks);
        let t_end = sh.len() as f64 * rec.window_ms / 1000.0;
        let ymax = sh
            .iter()
            .flatten()
            .copied()
            .fold(0.0, f64::max)
            .clamp(0.05, 1.0)
            * 1.05;
        let mut b = ChartBuilder::on(area);
        b.margin(6);
        if text {
            b.caption(name.as_str(), ("sans-serif", 13))
                .x_label_area_size(18)
                .y_label_area_size(30);
        }
        let mut chart = b
            .build_cartesian_2d(0.0..t_end.max(1e-3), 0.0..ymax)
            .map_err(err)?;
        if text {
            chart
                .configure_mesh()
                .x_labels(4)
                .y_labels(4)
                .label_style(("sans-serif", 10))
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
