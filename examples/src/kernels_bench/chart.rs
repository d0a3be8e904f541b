//! The SVG chart: one horizontal bar per row, its % of the physical reference, educational
//! kernels next to fast ones.

use super::rows::{Kind, Row};
use plotters::prelude::*;
use std::error::Error;

const EDU: RGBColor = RGBColor(230, 126, 34);
const FAST: RGBColor = RGBColor(41, 128, 185);
const REFERENCE: RGBColor = RGBColor(127, 140, 141);

/// The chart as SVG text; rows without a reference figure (e.g. matmul without `--torch`) are
/// left out.
pub fn svg(rows: &[Row], title: &str) -> Result<String, Box<dyn Error>> {
    let bars: Vec<(&Row, f64)> = rows
        .iter()
        .filter_map(|r| r.pct().filter(|p| p.is_finite()).map(|p| (r, p)))
        .collect();
    let n = bars.len().max(1);
    let labels: Vec<String> = bars
        .iter()
        .map(|(r, _)| format!("{} - {}", r.label(), r.size))
        .collect();
    let xmax = bars.iter().map(|b| b.1).fold(100.0, f64::max) * 1.12;
    // The slot of bar i, counted from the top.
    let slot = |i: usize| n - 1 - i;
    let mut out = String::new();
    {
        // Slots 0..n hold the bars (top row first); the three above them hold the legend.
        let height = 200 + 22 * n as u32;
        let root = SVGBackend::with_string(&mut out, (1400, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(520)
            .build_cartesian_2d(0.0..xmax, (0usize..n + 2).into_segmented())?;
        let label_of = |v: &SegmentValue<usize>| match v {
            SegmentValue::CenterOf(j) | SegmentValue::Exact(j) if *j < labels.len() => {
                labels[n - 1 - *j].clone()
            }
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n + 3)
            .y_label_formatter(&label_of)
            .x_label_formatter(&|x| format!("{x:.0}%"))
            .x_desc(
                "% of reference: D2D copy bandwidth (memory-bound kernels) or cuBLAS SGEMM (matmul)",
            )
            .label_style(("sans-serif", 12))
            .draw()?;
        for (kind, color, name) in [
            (Kind::Educational, EDU, "educational"),
            (Kind::Fast, FAST, "fast"),
            (Kind::Reference, REFERENCE, "reference"),
        ] {
            chart
                .draw_series(
                    bars.iter()
                        .enumerate()
                        .filter(|(_, (r, _))| r.kind == kind)
                        .map(|(i, (_, p))| {
                            let mut bar = Rectangle::new(
                                [
                                    (0.0, SegmentValue::Exact(slot(i))),
                                    (*p, SegmentValue::Exact(slot(i) + 1)),
                                ],
                                color.filled(),
                            );
                            bar.set_margin(3, 3, 0, 0);
                            bar
                        }),
                )?
                .label(name)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        chart.draw_series(bars.iter().enumerate().map(|(i, (_, p))| {
            Text::new(
                format!("{p:.0}%"),
                (*p + xmax * 0.004, SegmentValue::CenterOf(slot(i))),
                ("sans-serif", 11),
            )
        }))?;
        chart.draw_series(LineSeries::new(
            [(100.0, SegmentValue::Exact(0)), (100.0, SegmentValue::Last)],
            BLACK.stroke_width(1),
        ))?;
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kb::rows::{Figure, Unit};

    #[test]
    fn renders_one_bar_per_row_with_a_reference() {
        let row = |kernel: &str, kind, rate, reference: Option<f64>| Row {
            section: "s",
            kernel: kernel.into(),
            kind,
            size: "2^28 f32".into(),
            secs: 1e-3,
            reps: 10,
            trials: 3,
            rate,
            unit: Unit::GBs,
            reference: reference.map(|value| Figure {
                value,
                label: "D2D".into(),
            }),
            torch: None,
            note: String::new(),
        };
        let rows = vec![
            row("memcpy", Kind::Reference, 4000.0, None),
            row("naive_kernel", Kind::Educational, 1000.0, Some(4000.0)),
            row("fast_kernel", Kind::Fast, 3900.0, Some(4000.0)),
        ];
        let svg = svg(&rows, "test").unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("naive_kernel [edu]"), "{svg}");
        assert!(svg.contains("fast_kernel [fast]"), "{svg}");
        assert!(!svg.contains("memcpy [ref]"), "{svg}");
        assert!(svg.contains("25%") && svg.contains("98%"), "{svg}");
    }
}
