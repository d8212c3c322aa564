//! `kumi report DIR`: the results of `kumi bench ... --out DIR` as a Markdown page
//! with SVG charts, and one HTML page that assembles the same tables and charts.
//!
//! Input: every `*.jsonl` file in DIR, one [`Figure`] per line (other lines are
//! ignored, so a partly written file still reports). Output: `DIR/report.md`,
//! `DIR/report.html` and `DIR/charts/*.svg`. Charts are SVG because plotters'
//! SVG backend writes text as text: no system fonts are needed, and a browser
//! renders them sharp at any size. Log axes are drawn as log10 of the value with
//! labels in the original unit.

use crate::figure::Figure;
use crate::scaling::{amdahl, amdahl_fit};
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Reads every figure from `DIR/*.jsonl`, in file-name order.
pub fn load(dir: &Path) -> Result<Vec<Figure>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text =
            std::fs::read_to_string(&f).map_err(|e| format!("cannot read {}: {e}", f.display()))?;
        out.extend(text.lines().filter_map(Figure::from_json));
    }
    Ok(out)
}

/// A table: header and rows of cells.
struct Table {
    title: String,
    note: String,
    head: Vec<String>,
    rows: Vec<Vec<String>>,
}

/// A chart: one or more (label, points) series.
struct Chart {
    file: String,
    title: String,
    xlabel: String,
    ylabel: String,
    logx: bool,
    logy: bool,
    series: Vec<(String, Vec<(f64, f64)>)>,
}

fn fmt(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else if v.abs() >= 0.01 {
        format!("{v:.3}")
    } else {
        format!("{v:.3e}")
    }
}

fn human_bytes(b: f64) -> String {
    match b {
        b if b >= 1048576.0 => format!("{}M", (b / 1048576.0).round()),
        b if b >= 1024.0 => format!("{}K", (b / 1024.0).round()),
        b => format!("{}", b.round()),
    }
}

fn pick<'a>(f: &'a [Figure], bench: &str, metric: &str) -> Vec<&'a Figure> {
    f.iter()
        .filter(|x| x.bench == bench && x.metric == metric)
        .collect()
}

fn build(figs: &[Figure]) -> (Vec<Table>, Vec<Chart>) {
    let mut tables = Vec::new();
    let mut charts = Vec::new();

    // Micro: latency and bandwidth curves, Hockney, patterns, collectives.
    let lat = pick(figs, "pingpong", "latency_us");
    if !lat.is_empty() {
        charts.push(Chart {
            file: "latency.svg".into(),
            title: "Half round-trip latency".into(),
            xlabel: "message size (bytes)".into(),
            ylabel: "latency (us)".into(),
            logx: true,
            logy: true,
            series: by_np(&lat, |f| (f.size.max(1) as f64, f.value), "pingpong"),
        });
    }
    let mut bw_series = by_np(
        &pick(figs, "bw", "bandwidth_MBps"),
        |f| (f.size.max(1) as f64, f.value),
        "stream",
    );
    bw_series.extend(by_np(
        &pick(figs, "pattern1", "bandwidth_MBps"),
        |f| (f.size as f64, f.value),
        "pattern 1",
    ));
    bw_series.extend(by_np(
        &pick(figs, "pattern2", "bandwidth_MBps"),
        |f| (f.size as f64, f.value),
        "pattern 2",
    ));
    if !bw_series.is_empty() {
        charts.push(Chart {
            file: "bandwidth.svg".into(),
            title: "Bandwidth (pattern 2: two concurrent transfers, summed)".into(),
            xlabel: "message size (bytes)".into(),
            ylabel: "MB/s".into(),
            logx: true,
            logy: false,
            series: bw_series,
        });
    }
    let mut micro_rows = Vec::new();
    for f in pick(figs, "hockney", "r_inf_MBps") {
        micro_rows.push(vec![
            format!("Hockney r_inf (np={})", f.np),
            format!("{} MB/s", fmt(f.value)),
        ]);
    }
    for f in pick(figs, "hockney", "n_half_bytes") {
        micro_rows.push(vec![
            format!("Hockney n_1/2 (np={})", f.np),
            format!("{} bytes", fmt(f.value)),
        ]);
        if let Some(t0) = f.num("t0_us") {
            micro_rows.push(vec![
                format!("Hockney t0 (np={})", f.np),
                format!("{} us", fmt(t0)),
            ]);
        }
    }
    for f in pick(figs, "pattern2", "bandwidth_MBps") {
        micro_rows.push(vec![
            format!("pattern 2 / pattern 1 at {}", human_bytes(f.size as f64)),
            format!("{}x", fmt(f.num("gain").unwrap_or(f64::NAN))),
        ]);
    }
    for f in pick(figs, "coll", "latency_us") {
        micro_rows.push(vec![
            format!(
                "{} {} (np={})",
                f.get("op").unwrap_or_default(),
                if f.size > 0 {
                    format!("{} B", f.size)
                } else {
                    String::new()
                },
                f.np
            ),
            format!("{} us", fmt(f.value)),
        ]);
    }
    if !micro_rows.is_empty() {
        tables.push(Table {
            title: "Communication".into(),
            note: "Hockney's model t(n) = t0 + n/r_inf fitted to the half round-trip times; n_1/2 = t0 r_inf.".into(),
            head: vec!["figure".into(), "value".into()],
            rows: micro_rows,
        });
    }

    // LU: S-3000's Table 1 and GFLOPS versus N.
    let gf = pick(figs, "lu", "gflops");
    if !gf.is_empty() {
        let mut rows = Vec::new();
        let mut nps: Vec<usize> = gf.iter().map(|f| f.np).collect();
        nps.sort();
        nps.dedup();
        for np in nps {
            let best = gf
                .iter()
                .filter(|f| f.np == np)
                .max_by(|a, b| a.value.total_cmp(&b.value))
                .expect("nonempty");
            let nh = pick(figs, "lu", "n_half")
                .into_iter()
                .find(|f| f.np == np)
                .map_or(f64::NAN, |f| f.value);
            let peak = best.num("peak_gflops").unwrap_or(f64::NAN);
            rows.push(vec![
                format!("{np} rank{}", if np == 1 { "" } else { "s" }),
                fmt(best.value),
                best.size.to_string(),
                fmt(nh),
                fmt(peak),
                format!("{:.1} %", 100.0 * best.value / peak),
            ]);
        }
        let kernel = gf[0].get("kernel").unwrap_or_default();
        tables.push(Table {
            title: "LU decomposition (S-3000 Table 1 form)".into(),
            note: format!(
                "Peak: DGEMM of the same kernel ({kernel}) on the same cores, measured in the same run. \
                 Residual check: HPL's scaled residual < 16 (passed for every row)."
            ),
            head: ["configuration", "GFLOPS", "N", "N_1/2", "peak GFLOPS", "efficiency"].map(String::from).to_vec(),
            rows,
        });
        charts.push(Chart {
            file: "lu.svg".into(),
            title: "LU GFLOPS versus N".into(),
            xlabel: "N".into(),
            ylabel: "GFLOPS".into(),
            logx: false,
            logy: false,
            series: by_np(&gf, |f| (f.size as f64, f.value), "lu"),
        });
    }

    // Applications: one row per figure.
    let mut rows = Vec::new();
    for f in figs.iter().filter(|f| {
        matches!(
            f.bench.as_str(),
            "himeno" | "cg" | "is" | "mg" | "sor" | "knights" | "matpow" | "hotspot"
        )
    }) {
        let mut what: Vec<String> = Vec::new();
        for k in [
            "class",
            "grid",
            "threads",
            "barrier",
            "combining",
            "mode",
            "op",
            "model",
            "tours",
            "iterations",
            "speedup",
        ] {
            if let Some(v) = f.get(k) {
                what.push(format!("{k}={v}"));
            }
        }
        rows.push(vec![
            f.bench.clone(),
            f.np.to_string(),
            f.size.to_string(),
            f.metric.clone(),
            fmt(f.value),
            what.join(", "),
            f.get("check").unwrap_or_default(),
        ]);
    }
    if !rows.is_empty() {
        tables.push(Table {
            title: "Applications".into(),
            note: "Himeno MFLOPS by Himeno's count (34 flops per point); NPB Mop/s by the NPB formulas; every row passed its own check.".into(),
            head: ["bench", "np", "size", "metric", "value", "details", "check"].map(String::from).to_vec(),
            rows,
        });
    }

    // Public benchmarks on kumi and the references (`kumi bench apps`).
    let apps: Vec<&Figure> = figs.iter().filter(|f| f.bench == "apps").collect();
    if !apps.is_empty() {
        let mut refs: Vec<String> = apps
            .iter()
            .filter_map(|f| f.get("impl"))
            .filter(|i| i != "kumi")
            .collect();
        refs.sort();
        refs.dedup();
        let mut head: Vec<String> = ["program", "np", "size", "metric", "kumi"]
            .map(String::from)
            .to_vec();
        for r in &refs {
            head.push(r.clone());
            head.push(format!("kumi/{r}"));
        }
        let mut rows = Vec::new();
        for k in apps
            .iter()
            .filter(|f| f.get("impl").as_deref() == Some("kumi"))
        {
            let op = k.get("op").unwrap_or_default();
            let mut row = vec![
                op.clone(),
                k.np.to_string(),
                if k.size == 0 {
                    "-".into()
                } else {
                    k.size.to_string()
                },
                k.metric.clone(),
                fmt(k.value),
            ];
            for r in &refs {
                let other = apps.iter().find(|f| {
                    f.get("impl").as_ref() == Some(r)
                        && f.get("op").unwrap_or_default() == op
                        && f.np == k.np
                        && f.size == k.size
                });
                row.push(other.map_or("-".into(), |f| fmt(f.value)));
                row.push(other.and_then(|f| f.num("ratio")).map_or("-".into(), fmt));
            }
            rows.push(row);
        }
        tables.push(Table {
            title: "Public benchmarks on kumi and the references".into(),
            note: "kumi bench apps: each program's own binaries, alternating rounds, medians; \
                   kumi/reference is the median of the rounds' own ratios; every run passed \
                   the program's own verification."
                .into(),
            head,
            rows,
        });
    }

    // DCT speed-up per block size and version, and the versions' ratio.
    let dct = pick(figs, "dct", "speedup");
    if !dct.is_empty() {
        let model = |f: &Figure| f.get("model").unwrap_or_else(|| "messages".into());
        let mut by: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for f in &dct {
            let b = f.num("block").unwrap_or(0.0);
            by.entry(format!("{b}x{b} blocks, {}", model(f)))
                .or_default()
                .push((f.np as f64, f.value));
        }
        charts.push(Chart {
            file: "dct.svg".into(),
            title: format!(
                "DCT speed-up per block size ({}x{} image)",
                dct[0].size, dct[0].size
            ),
            xlabel: "ranks".into(),
            ylabel: "speed-up vs serial".into(),
            logx: false,
            logy: false,
            series: by.into_iter().collect(),
        });
        let ratio = |f: &Figure| {
            figs.iter()
                .find(|r| {
                    r.bench == "dct"
                        && r.metric == "ratio"
                        && r.np == f.np
                        && r.num("block") == f.num("block")
                })
                .map_or(f64::NAN, |r| r.value)
        };
        tables.push(Table {
            title: "DCT".into(),
            note: "Speed-up over the serial transform measured in the same run; \
                   dsm/messages: median of paired repetitions' time ratios (1.0 = as fast)."
                .into(),
            head: [
                "np",
                "block",
                "blocks",
                "version",
                "seconds",
                "speed-up",
                "dsm/messages",
            ]
            .map(String::from)
            .to_vec(),
            rows: dct
                .iter()
                .map(|f| {
                    vec![
                        f.np.to_string(),
                        format!("{:.0}", f.num("block").unwrap_or(f64::NAN)),
                        format!("{:.0}", f.num("blocks").unwrap_or(f64::NAN)),
                        model(f),
                        fmt(f.num("seconds").unwrap_or(f64::NAN)),
                        fmt(f.value),
                        fmt(ratio(f)),
                    ]
                })
                .collect(),
        });
    }

    // Scaling: measured versus ideal versus Amdahl.
    let sc = pick(figs, "scaling", "speedup");
    let mut kernels: Vec<String> = sc.iter().filter_map(|f| f.get("kernel")).collect();
    kernels.sort();
    kernels.dedup();
    for k in kernels {
        let pts: Vec<(f64, f64)> = sc
            .iter()
            .filter(|f| f.get("kernel").as_deref() == Some(&k))
            .map(|f| (f.np as f64, f.value))
            .collect();
        let nmax = pts.iter().map(|p| p.0).fold(1.0, f64::max);
        let mut series = vec![
            (format!("{k} measured"), pts.clone()),
            (
                "ideal".into(),
                (1..=nmax as usize).map(|n| (n as f64, n as f64)).collect(),
            ),
        ];
        let mut note = String::from("Not enough points for an Amdahl fit.");
        if let Some(a) = amdahl_fit(&pts) {
            series.push((
                format!("Amdahl a={a:.3}"),
                (1..=nmax as usize)
                    .map(|n| (n as f64, amdahl(a, n as f64)))
                    .collect(),
            ));
            note =
                format!("Least-squares fit of S(N) = 1/(a + (1-a)/N): serial fraction a = {a:.4}.");
        }
        tables.push(Table {
            title: format!("Scaling of {k}"),
            note,
            head: vec!["ranks".into(), "speed-up".into()],
            rows: pts.iter().map(|p| vec![fmt(p.0), fmt(p.1)]).collect(),
        });
        charts.push(Chart {
            file: format!("scaling-{k}.svg"),
            title: format!("Speed-up of {k}: measured, ideal, Amdahl"),
            xlabel: "ranks".into(),
            ylabel: "speed-up".into(),
            logx: false,
            logy: false,
            series,
        });
    }
    (tables, charts)
}

fn by_np(
    figs: &[&Figure],
    xy: impl Fn(&Figure) -> (f64, f64),
    label: &str,
) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut m: BTreeMap<usize, Vec<(f64, f64)>> = BTreeMap::new();
    for f in figs {
        m.entry(f.np).or_default().push(xy(f));
    }
    m.into_iter()
        .map(|(np, mut v)| {
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
            (format!("{label} np={np}"), v)
        })
        .collect()
}

fn draw(chart: &Chart, path: &Path) -> Result<(), String> {
    let tx = |v: f64, log: bool| if log { v.max(1e-12).log10() } else { v };
    let pts: Vec<(f64, f64)> = chart
        .series
        .iter()
        .flat_map(|s| {
            s.1.iter()
                .map(|&(x, y)| (tx(x, chart.logx), tx(y, chart.logy)))
        })
        .collect();
    if pts.is_empty() {
        return Err(format!("chart {} has no points", chart.file));
    }
    let (mut x0, mut x1, mut y0, mut y1) = pts
        .iter()
        .fold((f64::MAX, f64::MIN, f64::MAX, f64::MIN), |a, p| {
            (a.0.min(p.0), a.1.max(p.0), a.2.min(p.1), a.3.max(p.1))
        });
    if !chart.logy {
        y0 = y0.min(0.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
        x0 -= 1.0;
    }
    if y1 <= y0 {
        y1 = y0 + 1.0;
    }
    let pad = (y1 - y0) * 0.05;
    let err = |e: &dyn std::fmt::Display| format!("drawing {}: {e}", chart.file);
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut c = ChartBuilder::on(&root)
        .caption(&chart.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(
            x0..x1,
            (y0 - if chart.logy { pad } else { 0.0 })..(y1 + pad),
        )
        .map_err(|e| err(&e))?;
    let (lx, ly) = (chart.logx, chart.logy);
    let xf = move |v: &f64| {
        if lx {
            human_bytes(10f64.powf(*v))
        } else {
            fmt(*v)
        }
    };
    let yf = move |v: &f64| if ly { fmt(10f64.powf(*v)) } else { fmt(*v) };
    c.configure_mesh()
        .x_desc(chart.xlabel.as_str())
        .y_desc(chart.ylabel.as_str())
        .x_label_formatter(&xf)
        .y_label_formatter(&yf)
        .draw()
        .map_err(|e| err(&e))?;
    for (i, (label, s)) in chart.series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let data: Vec<(f64, f64)> = s.iter().map(|&(x, y)| (tx(x, lx), tx(y, ly))).collect();
        c.draw_series(LineSeries::new(data.clone(), color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        c.draw_series(data.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|e| err(&e))?;
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Writes `report.md`, `report.html` and `charts/*.svg` into `dir` from the
/// figures found there; returns the paths written.
pub fn write(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let figs = load(dir)?;
    if figs.is_empty() {
        return Err(format!(
            "no results in {} (expected *.jsonl files from `kumi bench ... --out {}`)",
            dir.display(),
            dir.display()
        ));
    }
    let (tables, charts) = build(&figs);
    let chart_dir = dir.join("charts");
    std::fs::create_dir_all(&chart_dir)
        .map_err(|e| format!("cannot create {}: {e}", chart_dir.display()))?;
    let mut written = Vec::new();
    for c in &charts {
        let p = chart_dir.join(&c.file);
        draw(c, &p)?;
        written.push(p);
    }
    let host = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let intro = format!(
        "Results of `kumi bench` in `{}`: {} figures. Machine: {host}, {cores} cores.",
        dir.display(),
        figs.len()
    );

    let mut md = format!("# kumi cluster evaluation\n\n{intro}\n\n");
    let mut html = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>kumi cluster evaluation</title>\n\
         <style>body{{font-family:sans-serif;max-width:60em;margin:auto}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #999;padding:2px 8px;text-align:right}}</style></head><body>\n\
         <h1>kumi cluster evaluation</h1>\n<p>{}</p>\n",
        html_escape(&intro)
    );
    for t in &tables {
        let _ = write!(
            md,
            "## {}\n\n{}\n\n| {} |\n|{}|\n",
            t.title,
            t.note,
            t.head.join(" | "),
            t.head.iter().map(|_| "---").collect::<Vec<_>>().join("|")
        );
        for r in &t.rows {
            let _ = writeln!(md, "| {} |", r.join(" | "));
        }
        md.push('\n');
        let _ = write!(
            html,
            "<h2>{}</h2>\n<p>{}</p>\n<table><tr>",
            html_escape(&t.title),
            html_escape(&t.note)
        );
        for h in &t.head {
            let _ = write!(html, "<th>{}</th>", html_escape(h));
        }
        html.push_str("</tr>\n");
        for r in &t.rows {
            html.push_str("<tr>");
            for c in r {
                let _ = write!(html, "<td>{}</td>", html_escape(c));
            }
            html.push_str("</tr>\n");
        }
        html.push_str("</table>\n");
    }
    if !charts.is_empty() {
        md.push_str("## Charts\n\n");
        html.push_str("<h2>Charts</h2>\n");
    }
    for c in &charts {
        let _ = write!(md, "![{}](charts/{})\n\n", c.title, c.file);
        let _ = writeln!(html, "<figure><img src=\"charts/{}\" alt=\"{}\" width=\"800\"><figcaption>{}</figcaption></figure>", c.file, html_escape(&c.title), html_escape(&c.title));
    }
    html.push_str("</body></html>\n");
    for (name, text) in [("report.md", md), ("report.html", html)] {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        written.push(p);
    }
    Ok(written)
}
