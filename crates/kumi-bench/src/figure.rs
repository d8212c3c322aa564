//! What a suite kernel yields: figures (a [`Record`] plus fields of its own) or a
//! failure that names the check that failed.
//!
//! [`Record`] stays the five-field line the micro-benchmarks print; the suite's
//! kernels need more (`class`, `kernel`, `verified`, ...), so a [`Figure`] carries
//! them after the standard five, and its parser reads any flat JSON object, so
//! `kumi report` can read every line any kernel ever wrote.

use crate::Record;
use std::fmt;

/// One measured figure with extra fields.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// Benchmark name (`lu`, `himeno`, `cg`, ...).
    pub bench: String,
    /// Number of ranks in the job.
    pub np: usize,
    /// Problem size (meaning per benchmark: N, points, keys, bytes).
    pub size: usize,
    /// What `value` measures (`gflops`, `mflops`, `mops`, `seconds`, ...).
    pub metric: String,
    /// The figure.
    pub value: f64,
    /// Further fields, as (name, JSON value text) in print order.
    pub extra: Vec<(String, String)>,
}

impl Figure {
    /// A figure without extra fields.
    pub fn new(bench: &str, np: usize, size: usize, metric: &str, value: f64) -> Figure {
        Figure {
            bench: bench.into(),
            np,
            size,
            metric: metric.into(),
            value,
            extra: Vec::new(),
        }
    }

    /// Adds a string field.
    pub fn with_str(mut self, key: &str, v: &str) -> Figure {
        self.extra.push((key.into(), quote(v)));
        self
    }

    /// Adds a numeric field.
    pub fn with_num(mut self, key: &str, v: f64) -> Figure {
        let text = if v.is_finite() {
            format!("{v}")
        } else {
            "null".into()
        };
        self.extra.push((key.into(), text));
        self
    }

    /// The value of extra field `key` as text (a JSON string unquoted and
    /// unescaped), if present.
    pub fn get(&self, key: &str) -> Option<String> {
        let v = &self.extra.iter().find(|(k, _)| k == key)?.1;
        if v.len() >= 2 && v.starts_with('"') {
            return parse_flat_object(&format!("{{\"v\": {v}}}"))
                .and_then(|mut f| f.pop())
                .map(|(_, s)| unescape(&s[1..s.len() - 1]));
        }
        Some(v.clone())
    }

    /// The numeric value of extra field `key`, if present and a number.
    pub fn num(&self, key: &str) -> Option<f64> {
        self.get(key).and_then(|v| v.parse().ok())
    }

    /// The standard five fields.
    pub fn record(&self) -> Record {
        Record {
            bench: self.bench.clone(),
            np: self.np,
            size: self.size,
            metric: self.metric.clone(),
            value: self.value,
        }
    }

    /// One JSON object: the standard five fields, then the extra ones.
    pub fn to_json(&self) -> String {
        let mut s = format!(
            "{{\"bench\": {}, \"np\": {}, \"size\": {}, \"metric\": {}, \"value\": {}",
            quote(&self.bench),
            self.np,
            self.size,
            quote(&self.metric),
            if self.value.is_finite() {
                format!("{:.6}", self.value)
            } else {
                "null".into()
            }
        );
        for (k, v) in &self.extra {
            s += &format!(", {}: {v}", quote(k));
        }
        s.push('}');
        s
    }

    /// Parses one flat JSON object with at least `bench`, `metric` and a finite
    /// `value`; `None` for any other line.
    pub fn from_json(line: &str) -> Option<Figure> {
        let fields = parse_flat_object(line)?;
        let mut f = Figure::new("", 0, 0, "", f64::NAN);
        for (k, v) in fields {
            let plain = v.trim_matches('"').to_string();
            match k.as_str() {
                "bench" => f.bench = plain,
                "np" => f.np = plain.parse().ok()?,
                "size" => f.size = plain.parse().ok()?,
                "metric" => f.metric = plain,
                "value" => f.value = plain.parse().unwrap_or(f64::NAN),
                _ => f.extra.push((k, v)),
            }
        }
        (!f.bench.is_empty() && !f.metric.is_empty() && f.value.is_finite()).then_some(f)
    }
}

impl From<Record> for Figure {
    fn from(r: Record) -> Figure {
        Figure::new(&r.bench, r.np, r.size, &r.metric, r.value)
    }
}

/// The inverse of [`quote`] on its inner text.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('u') => {
                let hex: String = it.by_ref().take(4).collect();
                if let Some(ch) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    out.push(ch);
                }
            }
            Some(c) => out.push(c),
            None => {}
        }
    }
    out
}

/// `s` as a JSON string (quoted, escaped).
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Parses `{"k": v, ...}` where every v is a string, number, bool or null.
/// Returns (key, value text) with strings kept quoted (escapes resolved).
fn parse_flat_object(line: &str) -> Option<Vec<(String, String)>> {
    let mut it = line.trim().chars().peekable();
    let skip_ws = |it: &mut std::iter::Peekable<std::str::Chars<'_>>| {
        while it.peek().is_some_and(|c| c.is_whitespace()) {
            it.next();
        }
    };
    let read_string = |it: &mut std::iter::Peekable<std::str::Chars<'_>>| -> Option<String> {
        if it.next()? != '"' {
            return None;
        }
        let mut s = String::new();
        loop {
            match it.next()? {
                '"' => return Some(s),
                '\\' => match it.next()? {
                    'n' => s.push('\n'),
                    't' => s.push('\t'),
                    'u' => {
                        let hex: String = (0..4).filter_map(|_| it.next()).collect();
                        s.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                    }
                    c => s.push(c),
                },
                c => s.push(c),
            }
        }
    };
    if it.next()? != '{' {
        return None;
    }
    let mut out = Vec::new();
    loop {
        skip_ws(&mut it);
        if it.peek() == Some(&'}') {
            it.next();
            break;
        }
        let key = read_string(&mut it)?;
        skip_ws(&mut it);
        if it.next()? != ':' {
            return None;
        }
        skip_ws(&mut it);
        let val = if it.peek() == Some(&'"') {
            quote(&read_string(&mut it)?)
        } else {
            let mut v = String::new();
            while let Some(&c) = it.peek() {
                if c == ',' || c == '}' || c.is_whitespace() {
                    break;
                }
                v.push(c);
                it.next();
            }
            if v.is_empty() || v.starts_with('{') || v.starts_with('[') {
                return None;
            }
            v
        };
        out.push((key, val));
        skip_ws(&mut it);
        match it.next()? {
            ',' => continue,
            '}' => break,
            _ => return None,
        }
    }
    skip_ws(&mut it);
    it.next().is_none().then_some(out)
}

/// Why a suite kernel did not produce figures.
#[derive(Debug)]
pub enum Failure {
    /// A kumi call failed.
    Comm(kumi::Error),
    /// The benchmark's own result check failed: the result is wrong.
    Check {
        /// The check's name (e.g. `lu scaled residual`).
        check: String,
        /// What was found versus what was expected.
        detail: String,
    },
    /// The options do not make sense for this kernel.
    Usage(String),
}

impl Failure {
    /// A failed result check.
    pub fn check(check: &str, detail: impl Into<String>) -> Failure {
        Failure::Check {
            check: check.into(),
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Comm(e) => write!(f, "{e}"),
            Failure::Check { check, detail } => {
                write!(f, "VERIFICATION FAILED: {check}: {detail}")
            }
            Failure::Usage(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for Failure {}

impl From<kumi::Error> for Failure {
    fn from(e: kumi::Error) -> Failure {
        Failure::Comm(e)
    }
}

/// A kernel's result.
pub type Outcome = Result<Vec<Figure>, Failure>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figure_round_trip_with_extras() {
        let f = Figure::new("lu", 2, 1000, "gflops", 12.5)
            .with_str("kernel", "faer avx512 \"x\"")
            .with_num("efficiency", 0.875);
        let g = Figure::from_json(&f.to_json()).expect("parses");
        assert_eq!(g.bench, "lu");
        assert_eq!(g.get("kernel").as_deref(), Some("faer avx512 \"x\""));
        assert_eq!(g.get("efficiency").as_deref(), Some("0.875"));
        assert_eq!(g.num("efficiency"), Some(0.875));
        assert_eq!(g.value, 12.5);
    }

    #[test]
    fn reads_plain_records_and_rejects_other_lines() {
        let r = Record {
            bench: "pingpong".into(),
            np: 2,
            size: 8,
            metric: "latency_us".into(),
            value: 0.5,
        };
        let f = Figure::from_json(&r.to_json()).expect("record line");
        assert_eq!(f.record(), r);
        for bad in [
            "",
            "hello",
            "{",
            "{\"bench\": \"x\"}",
            "{\"a\": [1]}",
            "{\"bench\": \"x\", \"metric\": \"m\", \"value\": 1} x",
        ] {
            assert!(Figure::from_json(bad).is_none(), "{bad:?}");
        }
    }
}
