//! A training run's loss curves and their files: an SVG chart (plotters' SVG backend), a CSV
//! and a JSON document (`train_gpt` writes them).

use plotters::prelude::*;
use serde_json::{json, Value};
use std::error::Error;
use std::path::Path;

/// One evaluation: both splits' mean loss at an iteration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EvalPoint {
    /// Iterations done when it was taken.
    pub iter: usize,
    /// The training split's loss.
    pub train: f32,
    /// The validation split's loss.
    pub val: f32,
}

/// The curves of a run.
#[derive(Debug, Clone, Default)]
pub struct Curves {
    /// Each iteration's training loss (its micro-batches' mean, dropout on).
    pub steps: Vec<(usize, f32)>,
    /// The evaluations.
    pub evals: Vec<EvalPoint>,
}

const STEP: RGBColor = RGBColor(170, 190, 210);
const TRAIN: RGBColor = RGBColor(41, 128, 185);
const VAL: RGBColor = RGBColor(230, 126, 34);

impl Curves {
    /// The chart as SVG text.
    pub fn svg(&self, title: &str) -> Result<String, Box<dyn Error>> {
        let finite = |v: f32| v.is_finite().then_some(f64::from(v));
        let ys: Vec<f64> = self
            .steps
            .iter()
            .filter_map(|s| finite(s.1))
            .chain(
                self.evals
                    .iter()
                    .flat_map(|e| [finite(e.train), finite(e.val)])
                    .flatten(),
            )
            .collect();
        let ymax = ys.iter().copied().fold(1.0, f64::max) * 1.05;
        let ymin = ys
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min)
            .min(ymax * 0.5)
            .max(0.0)
            * 0.95;
        let last = self
            .steps
            .iter()
            .map(|s| s.0)
            .chain(self.evals.iter().map(|e| e.iter))
            .max()
            .unwrap_or(1)
            .max(1);
        let mut out = String::new();
        {
            let root = SVGBackend::with_string(&mut out, (1000, 600)).into_drawing_area();
            root.fill(&WHITE)?;
            let mut chart = ChartBuilder::on(&root)
                .caption(title, ("sans-serif", 20))
                .margin(16)
                .x_label_area_size(44)
                .y_label_area_size(60)
                .build_cartesian_2d(0.0..last as f64, ymin..ymax)?;
            chart
                .configure_mesh()
                .x_desc("iteration")
                .y_desc("cross-entropy loss (nats per character)")
                .label_style(("sans-serif", 13))
                .draw()?;
            chart
                .draw_series(LineSeries::new(
                    self.steps
                        .iter()
                        .filter_map(|&(i, l)| finite(l).map(|l| (i as f64, l))),
                    STEP.stroke_width(1),
                ))?
                .label("training loss per iteration (dropout on)")
                .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], STEP.stroke_width(2)));
            for (color, name, pick) in [
                (TRAIN, "train split (evaluation)", true),
                (VAL, "validation split (evaluation)", false),
            ] {
                let points: Vec<(f64, f64)> = self
                    .evals
                    .iter()
                    .filter_map(|e| {
                        finite(if pick { e.train } else { e.val }).map(|l| (e.iter as f64, l))
                    })
                    .collect();
                chart
                    .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
                    .label(name)
                    .legend(move |(x, y)| {
                        PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2))
                    });
                chart.draw_series(
                    points
                        .into_iter()
                        .map(|p| Circle::new(p, 3, color.filled())),
                )?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.9))
                .border_style(BLACK)
                .label_font(("sans-serif", 13))
                .draw()?;
            root.present()?;
        }
        Ok(out)
    }

    /// `iter,train_step,eval_train,eval_val` rows: every iteration's training loss, with the
    /// evaluation's two losses on the rows of the iterations evaluated (empty elsewhere).
    pub fn csv(&self) -> String {
        let mut rows: std::collections::BTreeMap<usize, [Option<f32>; 3]> = Default::default();
        for &(i, l) in &self.steps {
            rows.entry(i).or_default()[0] = Some(l);
        }
        for e in &self.evals {
            let r = rows.entry(e.iter).or_default();
            r[1] = Some(e.train);
            r[2] = Some(e.val);
        }
        let cell = |v: Option<f32>| v.map(|v| v.to_string()).unwrap_or_default();
        let mut s = String::from("iter,train_step,eval_train,eval_val\n");
        for (i, [a, b, c]) in rows {
            s.push_str(&format!("{i},{},{},{}\n", cell(a), cell(b), cell(c)));
        }
        s
    }

    /// `{"steps": [[iter, loss], …], "evals": [{"iter", "train", "val"}, …]}`.
    pub fn json(&self) -> Value {
        json!({
            "steps": self.steps.iter().map(|&(i, l)| json!([i, l])).collect::<Vec<_>>(),
            "evals": self.evals.iter()
                .map(|e| json!({"iter": e.iter, "train": e.train, "val": e.val}))
                .collect::<Vec<_>>(),
        })
    }

    /// Writes `loss.svg`, `losses.csv` and `losses.json` into `dir` (which must exist).
    pub fn write(&self, dir: &Path, title: &str) -> Result<(), Box<dyn Error>> {
        let put = |name: &str, text: String| -> Result<(), Box<dyn Error>> {
            let p = dir.join(name);
            std::fs::write(&p, text).map_err(|e| format!("writing {}: {e}", p.display()))?;
            Ok(())
        };
        put("loss.svg", self.svg(title)?)?;
        put("losses.csv", self.csv())?;
        put("losses.json", serde_json::to_string_pretty(&self.json())?)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curves() -> Curves {
        Curves {
            steps: (0..20).map(|i| (i, 4.0 - 0.1 * i as f32)).collect(),
            evals: vec![
                EvalPoint {
                    iter: 0,
                    train: 4.2,
                    val: 4.25,
                },
                EvalPoint {
                    iter: 10,
                    train: 3.0,
                    val: f32::NAN,
                },
                EvalPoint {
                    iter: 20,
                    train: 2.0,
                    val: 2.1,
                },
            ],
        }
    }

    #[test]
    fn files_hold_every_point() {
        let c = curves();
        let svg = c.svg("a run").unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("a run"),
            "{}",
            &svg[..80]
        );
        assert!(svg.contains("validation split"));
        let csv = c.csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], "iter,train_step,eval_train,eval_val");
        assert_eq!(lines.len(), 1 + 21); // iterations 0..20 and the last evaluation's 20
        assert_eq!(lines[1], "0,4,4.2,4.25");
        assert_eq!(lines[2], "1,3.9,,");
        assert_eq!(lines[21], "20,,2,2.1");
        let j = c.json();
        assert_eq!(j["steps"].as_array().unwrap().len(), 20);
        assert_eq!(j["evals"][2]["val"], 2.1f32 as f64);
        // An empty run still draws (axes only).
        assert!(Curves::default().svg("empty").is_ok());
    }
}
