//! Side-by-side figures of kumi and reference MPI stacks, gathered round by
//! round, and how they are shown: a table with each side's median and the
//! paired ratio kumi/reference, the worst ratio, a note when the machine
//! changed speed, or JSON lines. `kumi bench --vs` (the C twin) and `kumi
//! bench apps` (public benchmarks' binaries) both fill one.

use std::collections::BTreeMap;

/// A figure's identity inside one comparison: an operation or program
/// variant ("" when there is one kind), and a size.
pub type Key = (String, usize);

/// The figures of every side, round by round. Side 0 is kumi.
pub struct Comparison {
    /// The benchmark's name in the title and in each JSON line's `bench`.
    pub bench: String,
    /// Ranks of the job.
    pub np: u32,
    /// The sides' names; the first is kumi's.
    pub labels: Vec<String>,
    /// What every value measures (`latency_us`, `mops`...).
    pub metric: String,
    /// How the size column reads (bytes, a matrix order; empty: no size).
    pub size_label: fn(usize) -> String,
    /// Extra `"name": value` fields for every JSON line (already formatted).
    pub json_extra: String,
    /// `results[side][key]`: the values over the rounds, in round order.
    results: Vec<BTreeMap<Key, Vec<f64>>>,
    /// Keys in the order they were first seen (the order the kernels print).
    keys: Vec<Key>,
}

impl Comparison {
    /// An empty comparison of these sides (kumi first).
    pub fn new(bench: &str, np: u32, labels: Vec<String>) -> Comparison {
        Comparison {
            bench: bench.into(),
            np,
            results: vec![BTreeMap::new(); labels.len()],
            labels,
            metric: String::new(),
            size_label: human_size,
            json_extra: String::new(),
            keys: Vec::new(),
        }
    }

    /// One round's value of one figure on one side.
    pub fn add(&mut self, side: usize, key: Key, metric: &str, value: f64) {
        metric.clone_into(&mut self.metric);
        if !self.keys.contains(&key) {
            self.keys.push(key.clone());
        }
        self.results[side].entry(key).or_default().push(value);
    }

    /// Whether any figure was added.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    fn lower_is_better(&self) -> bool {
        kumi_bench::apps::lower_is_better(&self.metric)
    }

    /// One JSON object per side and figure: the median over the rounds, the
    /// number of rounds and, for a reference, the paired ratio kumi/reference.
    pub fn json_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for (side, label) in self.labels.iter().enumerate() {
            for key in &self.keys {
                let Some(vals) = self.results[side].get(key) else {
                    continue;
                };
                let (op, size) = (&key.0, key.1);
                let op = if op.is_empty() {
                    String::new()
                } else {
                    format!(", \"op\": {}", kumi_bench::figure::quote(op))
                };
                let ratio = match (side, self.results[0].get(key)) {
                    (1.., Some(k)) => format!(", \"ratio\": {:.6}", paired_ratio(k, vals)),
                    _ => String::new(),
                };
                lines.push(format!(
                    "{{\"bench\": \"{}\", \"np\": {}, \"size\": {size}, \"metric\": \"{}\", \"value\": {:.6}, \"impl\": \"{label}\", \"rounds\": {}{op}{ratio}{}}}",
                    self.bench,
                    self.np,
                    self.metric,
                    median(vals.clone()),
                    vals.len(),
                    self.json_extra
                ));
            }
        }
        lines
    }

    /// The table, the worst ratio against each reference and the speed-step
    /// note, as text.
    pub fn table(&self, title: &str) -> String {
        use std::fmt::Write as _;
        let better = if self.lower_is_better() {
            "lower is better: ratio < 1 means kumi is faster"
        } else {
            "higher is better: ratio > 1 means kumi is faster"
        };
        let rounds = self.results[0].values().map(Vec::len).max().unwrap_or(0);
        let mut s = format!(
            "{title} (np={}), {}, median of {rounds} alternating rounds (ratios: median of the \
             rounds' own ratios); {better}\n",
            self.np, self.metric
        );
        let with_op = self.keys.iter().any(|(op, _)| !op.is_empty());
        let op_width = self
            .keys
            .iter()
            .map(|k| k.0.len())
            .max()
            .unwrap_or(0)
            .max(10);
        let op_col = |op: &str| {
            if with_op {
                format!("{op:>op_width$}  ")
            } else {
                String::new()
            }
        };
        let mut head = format!("{}{:>10}  {:>12}", op_col("op"), "size", self.labels[0]);
        for l in &self.labels[1..] {
            head += &format!("  {l:>12}  {:>12}", format!("kumi/{l}"));
        }
        let _ = writeln!(s, "{head}");
        for key in &self.keys {
            let (op, size) = (&key.0, key.1);
            let kv = self.results[0].get(key);
            let k = kv.map_or(f64::NAN, |v| median(v.clone()));
            let size = match (self.size_label)(size) {
                s if s.is_empty() => "-".to_string(),
                s => s,
            };
            let mut line = format!("{}{size:>10}  {k:>12.3}", op_col(op));
            for res in &self.results[1..] {
                match (res.get(key), kv) {
                    (Some(v), Some(kv)) => {
                        let r = median(v.clone());
                        line += &format!("  {r:>12.3}  {:>12.3}", paired_ratio(kv, v));
                    }
                    (Some(v), None) => {
                        line += &format!("  {:>12.3}  {:>12}", median(v.clone()), "-")
                    }
                    (None, _) => line += &format!("  {:>12}  {:>12}", "-", "-"),
                }
            }
            let _ = writeln!(s, "{line}");
        }
        for label in &self.labels[1..] {
            if let Some((ratio, what)) = self.worst(label) {
                let _ = writeln!(s, "worst kumi/{label}: {ratio:.3} ({what})");
            }
        }
        if let Some(note) = self.speed_step_note() {
            let _ = writeln!(s, "{note}");
        }
        s
    }

    /// kumi's worst paired ratio against the reference of this label, and
    /// the figure it is at (operation and size, as the table shows them).
    pub fn worst(&self, label: &str) -> Option<(f64, String)> {
        let side = self
            .labels
            .iter()
            .position(|l| l == label)
            .filter(|&s| s > 0)?;
        let (ratio, (op, size)) = self.worst_ratio(side)?;
        let what = [op.clone(), (self.size_label)(*size)]
            .into_iter()
            .filter(|x| !x.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        Some((ratio, what))
    }

    /// The figure where kumi fares worst against one reference: the largest
    /// paired ratio of a latency, the smallest of a bandwidth or rate.
    fn worst_ratio(&self, side: usize) -> Option<(f64, &Key)> {
        let lower_is_better = self.lower_is_better();
        let (kumi, other) = (&self.results[0], &self.results[side]);
        self.keys
            .iter()
            .filter_map(|k| Some((paired_ratio(kumi.get(k)?, other.get(k)?), k)))
            .filter(|(r, _)| r.is_finite())
            .max_by(|a, b| {
                if lower_is_better {
                    a.0.total_cmp(&b.0)
                } else {
                    b.0.total_cmp(&a.0)
                }
            })
    }

    /// A note under the table when some side's rounds of one figure differ by
    /// more than 2x: the machine changed speed during the run (a shared or
    /// virtual machine's steps), or that side is erratic there (MPICH's busy
    /// polling with more ranks than cores), so the medians of single sides
    /// mean little; the ratios, taken within rounds, hold better. The
    /// bandwidth of empty messages (zero, or nearly) is left out.
    fn speed_step_note(&self) -> Option<String> {
        let mut worst: Option<(f64, &str, &Key)> = None;
        for (side, label) in self.labels.iter().enumerate() {
            for key in &self.keys {
                if key.1 == 0 && self.metric.contains("bandwidth") {
                    continue;
                }
                let Some(v) = self.results[side].get(key) else {
                    continue;
                };
                let (lo, hi) = v
                    .iter()
                    .filter(|x| x.is_finite() && **x > 0.0)
                    .fold((f64::INFINITY, 0.0f64), |(lo, hi), &x| {
                        (lo.min(x), hi.max(x))
                    });
                if hi > 2.0 * lo && worst.is_none_or(|(w, _, _)| hi / lo > w) {
                    worst = Some((hi / lo, label, key));
                }
            }
        }
        let (spread, label, (op, size)) = worst?;
        let what = [op.clone(), (self.size_label)(*size)]
            .into_iter()
            .filter(|x| !x.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        Some(format!(
            "note: {label}'s rounds of {what} differ {spread:.1}x (the machine changed speed \
             during the run, or that side is erratic here): single medians mean little; the \
             ratios pair the sides within rounds"
        ))
    }
}

/// kumi against one reference: the median over the rounds of each round's
/// `kumi / reference` (the two values of a round index alike: every round
/// gives every side one value per figure). On this kind of machine the
/// speed changes in steps lasting minutes (a 3x slower cache-line hand-over
/// at times); the ratio of the two sides' medians mixes rounds from
/// different steps when a step falls inside the run, while the two runs of
/// one round are seconds apart and mostly see the same one.
pub fn paired_ratio(kumi: &[f64], reference: &[f64]) -> f64 {
    let ratios: Vec<f64> = kumi
        .iter()
        .zip(reference)
        .map(|(k, r)| k / r)
        .filter(|x| !x.is_nan())
        .collect();
    if ratios.is_empty() {
        return f64::NAN;
    }
    median(ratios)
}

/// The middle value (the upper one of an even count; NaN of none).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// `8 B`, `64 KiB`, `4 MiB`.
pub fn human_size(b: usize) -> String {
    match b {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::{paired_ratio, Comparison};

    /// The machine turns 3x slower between the two runs of round 3 and stays
    /// so: kumi is 0.833 of the reference in every round run at one speed,
    /// which the rounds' own ratios show and the ratio of the medians (1 /
    /// 3.6) does not.
    #[test]
    fn a_speed_step_inside_the_run_leaves_the_paired_ratio_alone() {
        let kumi = [1.0, 1.0, 1.0, 3.0, 3.0];
        let reference = [1.2, 1.2, 3.6, 3.6, 3.6];
        assert!((paired_ratio(&kumi, &reference) - 1.0 / 1.2).abs() < 1e-12);
        assert!(
            (super::median(kumi.to_vec()) / super::median(reference.to_vec()) - 1.0 / 3.6).abs()
                < 1e-12
        );
    }

    fn two_sides(metric: &str, size: usize, kumi: &[f64], mpich: &[f64]) -> Comparison {
        let mut c = Comparison::new("pingpong", 2, vec!["kumi".into(), "mpich".into()]);
        for (side, vals) in [kumi, mpich].into_iter().enumerate() {
            for &v in vals {
                c.add(side, (String::new(), size), metric, v);
            }
        }
        c
    }

    #[test]
    fn a_speed_step_is_noted_and_steady_rounds_are_not() {
        let steady = two_sides("latency_us", 8, &[1.0, 1.1, 0.9], &[1.2, 1.3, 1.2]);
        assert!(steady.speed_step_note().is_none());
        let step = two_sides("latency_us", 8, &[1.0, 1.1, 3.0], &[1.2, 1.3, 1.2]);
        let note = step.speed_step_note().expect("a note");
        assert!(note.contains("kumi's rounds of 8 B differ 3.0x"), "{note}");
        // Empty messages have no bandwidth to speak of.
        let bw = two_sides("bandwidth_MBps", 0, &[0.0, 1e-3, 0.0], &[1e-6, 0.0, 0.0]);
        assert!(bw.speed_step_note().is_none());
    }

    #[test]
    fn the_worst_ratio_is_the_largest_latency_and_the_smallest_rate() {
        let mut lat = two_sides("latency_us", 8, &[1.0], &[2.0]);
        lat.add(0, (String::new(), 16), "latency_us", 3.0);
        lat.add(1, (String::new(), 16), "latency_us", 2.0);
        let t = lat.table("pingpong");
        assert!(t.contains("worst kumi/mpich: 1.500 (16 B)"), "{t}");
        let mops = two_sides("mops", 0, &[100.0, 110.0, 90.0], &[200.0, 100.0, 100.0]);
        assert!(mops.table("is").contains("worst kumi/mpich: 0.900"));
        let json = mops.json_lines();
        assert_eq!(json.len(), 2);
        assert!(json[1].contains("\"impl\": \"mpich\"") && json[1].contains("\"ratio\": 0.9"));
        assert!(!json[0].contains("ratio"), "{}", json[0]);
    }

    #[test]
    fn no_rounds_give_no_ratio() {
        assert!(paired_ratio(&[], &[]).is_nan());
    }
}
