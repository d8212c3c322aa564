//! What `kumi bench apps` knows of public benchmarks: which of a build's files
//! are programs it can run, and how to read their figure and their own check
//! from what they print.
//!
//! Pure: the command (`kumi-cli`'s `apps`) finds the files, runs them on each
//! MPI stack and hands the output here. A program's output is accepted only
//! when it passed the program's own verification (NPB's `Verification =
//! SUCCESSFUL`, HPL's residual checks, a finite Himeno residual); a run that
//! prints a figure but fails its check is an error, never a figure.

/// A program `kumi bench apps` knows how to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Program {
    /// A NAS Parallel Benchmark (`is.A.x`: code `is`, class `A`).
    Npb {
        /// The benchmark code, lower case (`bt`, `cg`, `ep`, `ft`, `is`, `lu`, `mg`, `sp`).
        code: String,
        /// The problem class (`S`, `W`, `A`..`F`).
        class: char,
    },
    /// The Himeno benchmark's MPI version (`bmt`).
    Himeno,
    /// HPL (`xhpl`), which reads `HPL.dat` from its directory.
    Hpl,
    /// One of the OSU micro-benchmarks (`osu_latency`, `osu_alltoallv`...).
    Osu(String),
}

/// NPB's MPI codes (DT is a data-flow graph benchmark that needs a graph
/// argument and prints no Mop/s of the same kind; it is left out).
const NPB_CODES: [&str; 8] = ["bt", "cg", "ep", "ft", "is", "lu", "mg", "sp"];

impl Program {
    /// The program a file of this name is, if any: NPB's `<code>.<class>.x`,
    /// Himeno's `bmt`, HPL's `xhpl`, the OSU benchmarks' `osu_*`.
    pub fn from_file_name(name: &str) -> Option<Program> {
        match name {
            "bmt" => return Some(Program::Himeno),
            "xhpl" => return Some(Program::Hpl),
            _ => {}
        }
        if let Some(rest) = name.strip_prefix("osu_") {
            let ok = !rest.is_empty()
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            return ok.then(|| Program::Osu(name.to_string()));
        }
        let mut parts = name.split('.');
        let (code, class, x) = (parts.next()?, parts.next()?, parts.next()?);
        let mut class_chars = class.chars();
        let c = class_chars.next()?;
        (parts.next().is_none()
            && x == "x"
            && NPB_CODES.contains(&code)
            && class_chars.next().is_none()
            && "SWABCDEF".contains(c))
        .then(|| Program::Npb {
            code: code.into(),
            class: c,
        })
    }

    /// The program's name in tables and records (`is.A`, `himeno`, `hpl`,
    /// `osu_allreduce`).
    pub fn name(&self) -> String {
        match self {
            Program::Npb { code, class } => format!("{code}.{class}"),
            Program::Himeno => "himeno".into(),
            Program::Hpl => "hpl".into(),
            Program::Osu(n) => n.clone(),
        }
    }

    /// What a record's `size` means for this program.
    pub fn size_meaning(&self) -> SizeMeaning {
        match self {
            Program::Osu(_) => SizeMeaning::Bytes,
            Program::Hpl => SizeMeaning::Order,
            Program::Npb { .. } | Program::Himeno => SizeMeaning::None,
        }
    }

    /// Reads the figures out of one run's standard output, or says why the
    /// run does not count (its own check failed, or no figure was printed).
    pub fn parse(&self, out: &str) -> Result<Vec<Measured>, String> {
        match self {
            Program::Npb { code, class } => npb(code, *class, out),
            Program::Himeno => himeno(out),
            Program::Hpl => hpl(out),
            Program::Osu(_) => osu(out),
        }
    }
}

/// What the `size` of a program's figure is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeMeaning {
    /// Nothing: one figure per run (NPB, whose class is in the name; Himeno).
    None,
    /// A message size in bytes (OSU).
    Bytes,
    /// A matrix order (HPL's N).
    Order,
}

/// One figure of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    /// Appended to the program's name where one run gives several kinds of
    /// figure (HPL's variant, block size and grid: `WR11C2R4 NB=192 1x2`).
    pub variant: String,
    /// Message size, matrix order or 0 (see [`SizeMeaning`]).
    pub size: usize,
    /// `mops`, `mflops`, `gflops`, `latency_us`, `bandwidth_MBps`,
    /// `msg_rate_Mps`.
    pub metric: &'static str,
    /// The figure.
    pub value: f64,
}

/// Whether a smaller value of `metric` is better (latencies and times).
pub fn lower_is_better(metric: &str) -> bool {
    matches!(metric, "latency_us" | "seconds")
}

/// The text after `key`, then optional blanks and `=` or `:`, on the first
/// line (trimmed) that starts with `key`.
fn field<'a>(out: &'a str, key: &str) -> Option<&'a str> {
    out.lines().find_map(|l| {
        let rest = l.trim_start().strip_prefix(key)?.trim_start();
        let rest = rest.strip_prefix('=').or_else(|| rest.strip_prefix(':'))?;
        Some(rest.trim())
    })
}

fn number(text: &str, what: &str) -> Result<f64, String> {
    let v: f64 = text
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .parse()
        .map_err(|_| format!("{what} is not a number: {text:?}"))?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(format!("{what} is not finite: {text:?}"))
    }
}

/// NPB 3.x's closing block: `Class = A`, `Mop/s total = 512.3`,
/// `Verification = SUCCESSFUL`.
fn npb(code: &str, class: char, out: &str) -> Result<Vec<Measured>, String> {
    let verification = field(out, "Verification").ok_or_else(|| {
        format!("{code}.{class} printed no `Verification` line (it did not finish)")
    })?;
    if verification != "SUCCESSFUL" {
        return Err(format!(
            "{code}.{class} failed its own check: Verification = {verification}"
        ));
    }
    match field(out, "Class") {
        Some(c) if c.len() == 1 && c.starts_with(class) => {}
        other => {
            return Err(format!(
                "{code}.{class} says it ran class {}",
                other.unwrap_or("(none)")
            ))
        }
    }
    let mops = number(
        field(out, "Mop/s total").ok_or(format!("{code}.{class} printed no `Mop/s total`"))?,
        "Mop/s total",
    )?;
    Ok(vec![Measured {
        variant: String::new(),
        size: 0,
        metric: "mops",
        value: mops,
    }])
}

/// The Himeno benchmark's MPI versions: `Gosa : 1.2e-04` (the residual, the
/// only check it has: it must be a finite positive number) and `MFLOPS
/// measured : 12345.6`.
fn himeno(out: &str) -> Result<Vec<Measured>, String> {
    let gosa = number(
        field(out, "Gosa").ok_or("himeno printed no `Gosa` (residual) line")?,
        "Gosa",
    )?;
    if gosa <= 0.0 {
        return Err(format!("himeno's residual is not positive: Gosa = {gosa}"));
    }
    let mflops = number(
        field(out, "MFLOPS measured").ok_or("himeno printed no `MFLOPS measured` line")?,
        "MFLOPS measured",
    )?;
    Ok(vec![Measured {
        variant: String::new(),
        size: 0,
        metric: "mflops",
        value: mflops,
    }])
}

/// HPL 2.x: one result line per test (`WR11C2R4  10000  192  1  2  7.71
/// 8.645e+01`: variant, N, NB, P, Q, seconds, Gflops) and the summary
/// `n tests completed and passed residual checks`, `0 tests completed and
/// failed residual checks`, `0 tests skipped because of illegal input
/// values`.
fn hpl(out: &str) -> Result<Vec<Measured>, String> {
    let mut found = Vec::new();
    for l in out.lines() {
        let t: Vec<&str> = l.split_whitespace().collect();
        let [tv, n, nb, p, q, _secs, gflops] = t[..] else {
            continue;
        };
        if !(tv.starts_with("WR") || tv.starts_with("WC")) {
            continue;
        }
        let (Ok(n), Ok(nb), Ok(p), Ok(q)) = (
            n.parse::<usize>(),
            nb.parse::<usize>(),
            p.parse::<usize>(),
            q.parse::<usize>(),
        ) else {
            continue;
        };
        found.push(Measured {
            variant: format!("{tv} NB={nb} {p}x{q}"),
            size: n,
            metric: "gflops",
            value: number(gflops, "HPL's Gflops")?,
        });
    }
    let count = |tail: &str| {
        out.lines().find_map(|l| {
            let l = l.trim();
            l.strip_suffix(tail)?.trim().parse::<usize>().ok()
        })
    };
    let passed = count("tests completed and passed residual checks,");
    let failed = count("tests completed and failed residual checks,");
    let skipped = count("tests skipped because of illegal input values.");
    match (passed, failed, skipped) {
        (Some(p), Some(0), Some(0)) if p == found.len() && p > 0 => Ok(found),
        (Some(p), Some(f), Some(s)) => Err(format!(
            "hpl: {p} tests passed its residual check, {f} failed, {s} were skipped for \
             illegal input (and {} results were printed)",
            found.len()
        )),
        _ => Err("hpl printed no summary of its residual checks (it did not finish)".into()),
    }
}

/// The OSU micro-benchmarks: a header `# Size  <what>` and rows of a size
/// and the figure (further columns, as in `osu_mbw_mr`'s messages per
/// second, are left out). The nonblocking collectives' table (`Overall(us)
/// Compute(us) Pure Comm.(us) Overlap(%)`) gives two latencies per size:
/// `overall` (start, the benchmark's computation, tests and wait) and
/// `pure comm.` (the collective started and waited for at once).
fn osu(out: &str) -> Result<Vec<Measured>, String> {
    let mut lines = out.lines();
    let header = lines
        .by_ref()
        .find(|l| l.trim_start().starts_with("# Size"))
        .ok_or("no `# Size` table in the output (not a benchmark with a table of sizes)")?;
    let what = header.trim_start()["# Size".len()..].trim();
    if what.starts_with("Overall(us)") && what.contains("Pure Comm.(us)") {
        return osu_nonblocking(lines);
    }
    let metric = if what.contains("Latency") {
        "latency_us"
    } else if what.contains("Bandwidth") || what.starts_with("MB/s") {
        "bandwidth_MBps"
    } else if what.contains("Messages/s") || what.contains("Message Rate") {
        "msg_rate_Mps"
    } else {
        return Err(format!("unknown OSU figure {what:?}"));
    };
    let mut found = Vec::new();
    for l in lines {
        let mut t = l.split_whitespace();
        let (Some(size), Some(v)) = (t.next(), t.next()) else {
            continue;
        };
        let Ok(size) = size.parse::<usize>() else {
            continue;
        };
        let mut value = number(v, "an OSU figure")?;
        if metric == "msg_rate_Mps" {
            value /= 1e6;
        }
        found.push(Measured {
            variant: String::new(),
            size,
            metric,
            value,
        });
    }
    if found.is_empty() {
        return Err("the OSU table has no rows".into());
    }
    Ok(found)
}

/// The rows of an OSU nonblocking collective's table (see [`osu`]).
fn osu_nonblocking<'a>(rows: impl Iterator<Item = &'a str>) -> Result<Vec<Measured>, String> {
    let mut found = Vec::new();
    for l in rows {
        let t: Vec<&str> = l.split_whitespace().collect();
        let [size, overall, _compute, pure, ..] = t[..] else {
            continue;
        };
        let Ok(size) = size.parse::<usize>() else {
            continue;
        };
        for (variant, v) in [("overall", overall), ("pure comm.", pure)] {
            found.push(Measured {
                variant: variant.into(),
                size,
                metric: "latency_us",
                value: number(v, "an OSU figure")?,
            });
        }
    }
    if found.is_empty() {
        return Err("the OSU table has no rows".into());
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names() {
        let npb = |c: &str, k| Program::Npb {
            code: c.into(),
            class: k,
        };
        assert_eq!(Program::from_file_name("is.A.x"), Some(npb("is", 'A')));
        assert_eq!(Program::from_file_name("bt.C.x"), Some(npb("bt", 'C')));
        assert_eq!(Program::from_file_name("is.A.x").unwrap().name(), "is.A");
        for no in [
            "is.a.x",
            "is.AB.x",
            "xx.A.x",
            "is.A",
            "is.A.x.o",
            "dt.A.x",
            "setparams",
        ] {
            assert_eq!(Program::from_file_name(no), None, "{no}");
        }
        assert_eq!(Program::from_file_name("xhpl"), Some(Program::Hpl));
        assert_eq!(Program::from_file_name("bmt"), Some(Program::Himeno));
        assert_eq!(
            Program::from_file_name("osu_alltoallv"),
            Some(Program::Osu("osu_alltoallv".into()))
        );
        assert_eq!(Program::from_file_name("osu_latency.c"), None);
        assert_eq!(Program::from_file_name("osu_"), None);
    }

    const NPB_IS: &str = "
 IS Benchmark Completed
 Class           =                        A
 Size            =                  8388608
 Iterations      =                       10
 Time in seconds =                     0.16
 Total processes =                        2
 Active processes=                        2
 Mop/s total     =                   512.27
 Mop/s/process   =                   256.13
 Operation type  =              keys ranked
 Verification    =               SUCCESSFUL
 Version         =                    3.4.1
";

    #[test]
    fn npb_gives_mops_only_when_verified() {
        let is = Program::from_file_name("is.A.x").unwrap();
        let m = is.parse(NPB_IS).unwrap();
        assert_eq!((m.len(), m[0].metric, m[0].value), (1, "mops", 512.27));
        let bad = NPB_IS.replace("SUCCESSFUL", "UNSUCCESSFUL");
        let e = is.parse(&bad).unwrap_err();
        assert!(e.contains("Verification = UNSUCCESSFUL"), "{e}");
        let e = is
            .parse(&NPB_IS.replace(" Verification", " Nothing"))
            .unwrap_err();
        assert!(e.contains("did not finish"), "{e}");
        let e = Program::from_file_name("is.W.x")
            .unwrap()
            .parse(NPB_IS)
            .unwrap_err();
        assert!(e.contains("ran class A"), "{e}");
        let e = is.parse(&NPB_IS.replace("512.27", "NaN")).unwrap_err();
        assert!(e.contains("not finite"), "{e}");
    }

    #[test]
    fn himeno_needs_a_positive_residual() {
        let out = "cpu : 9.1 sec.\nLoop executed for 1536 times\nGosa : 1.3e-04 \n MFLOPS measured : 13546.7\n";
        let m = Program::Himeno.parse(out).unwrap();
        assert_eq!((m[0].metric, m[0].value), ("mflops", 13546.7));
        assert!(Program::Himeno
            .parse(&out.replace("1.3e-04", "nan"))
            .is_err());
        assert!(Program::Himeno.parse(&out.replace("1.3e-04", "0")).is_err());
        assert!(Program::Himeno.parse("Gosa : 1e-4\n").is_err());
    }

    const HPL: &str = "
T/V                N    NB     P     Q               Time                 Gflops
--------------------------------------------------------------------------------
WR11C2R4       10000   192     1     2              7.71             8.645e+01
HPL_pdgesv() start time Mon Nov 30 11:00:00 2026
--------------------------------------------------------------------------------
||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)=   3.42111e-03 ...... PASSED
================================================================================

Finished      1 tests with the following results:
              1 tests completed and passed residual checks,
              0 tests completed and failed residual checks,
              0 tests skipped because of illegal input values.
";

    #[test]
    fn hpl_counts_its_residual_checks() {
        let m = Program::Hpl.parse(HPL).unwrap();
        assert_eq!(m.len(), 1);
        assert_eq!(
            (m[0].variant.as_str(), m[0].size, m[0].value),
            ("WR11C2R4 NB=192 1x2", 10000, 86.45)
        );
        let failed = HPL
            .replace(
                "1 tests completed and passed",
                "0 tests completed and passed",
            )
            .replace(
                "0 tests completed and failed",
                "1 tests completed and failed",
            );
        let e = Program::Hpl.parse(&failed).unwrap_err();
        assert!(e.contains("1 failed"), "{e}");
        let cut = &HPL[..HPL.find("Finished").unwrap()];
        assert!(Program::Hpl
            .parse(cut)
            .unwrap_err()
            .contains("did not finish"));
    }

    #[test]
    fn osu_tables() {
        let lat = "
# OSU MPI Allreduce Latency Test v7.3
# Datatype: MPI_CHAR.
# Size       Avg Latency(us)
1                       0.83
2                       0.81
1048576               410.22
";
        let m = Program::Osu("osu_allreduce".into()).parse(lat).unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(
            (m[2].size, m[2].metric, m[2].value),
            (1048576, "latency_us", 410.22)
        );
        let mr = "# OSU MPI Multiple Bandwidth / Message Rate Test v7.3\n# Size                  MB/s        Messages/s\n1                       3.99        3993339.11\n";
        let m = Program::Osu("osu_mbw_mr".into()).parse(mr).unwrap();
        assert_eq!((m[0].metric, m[0].value), ("bandwidth_MBps", 3.99));
        let nb = "# OSU MPI Non-blocking All-to-Allv Personalized Exchange Latency Test v5.3
# Overall = Coll. Init + Compute + MPI_Test + MPI_Wait

# Size           Overall(us)       Compute(us)    Pure Comm.(us)        Overlap(%)
1                       2.56              1.51              1.10              4.18
1024                    2.46              1.51              1.17             18.39
";
        let m = Program::Osu("osu_ialltoallv".into()).parse(nb).unwrap();
        let got: Vec<_> = m
            .iter()
            .map(|x| (x.variant.as_str(), x.size, x.value))
            .collect();
        assert_eq!(
            got,
            [
                ("overall", 1, 2.56),
                ("pure comm.", 1, 1.10),
                ("overall", 1024, 2.46),
                ("pure comm.", 1024, 1.17)
            ]
        );
        let e = Program::Osu("osu_init".into())
            .parse("# OSU MPI Init Test v7.3\nnprocs: 2, min: 10 ms\n")
            .unwrap_err();
        assert!(e.contains("no `# Size` table"), "{e}");
        assert!(Program::Osu("osu_bw".into())
            .parse("# Size      Bandwidth (MB/s)\n")
            .is_err());
    }
}
