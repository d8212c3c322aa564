//! `kumi top`: a live view of a running job.
//!
//! The monitor connects to the job's control socket (`@kumi-<uid>-<job>`, an
//! abstract Unix socket), answers the launcher's challenge with `Monitor`
//! instead of a proof of the job secret, and asks for a snapshot about twice a
//! second. The launcher lets such a connection in only from the job owner's uid
//! and answers nothing but snapshots, so a monitor can read the job and never
//! change it: quitting (`q`) just closes the connection.
//!
//! Rates (messages and bytes per second) are differences between two snapshots
//! of the counters ranks report while they wait (about every second), so they
//! move in steps; CPU % comes from the launcher reading /proc.
//!
//! Under `kumi run --monitor` the view holds the terminal (alternate screen)
//! while the ranks still print: their lines, and kumi's own notices, go to an
//! [`OutputLog`] instead. The view shows the latest of them in a pane under the
//! table; when it closes (`q`, or the job ended) the terminal is restored and
//! every line held is written to the real stdout and stderr, in the order the
//! launcher read them; later lines go straight through. The log keeps at most
//! [`MEM_LIMIT`] bytes in memory and moves the rest to an unnamed temporary
//! file (created and unlinked at once, so it vanishes with the process), so a
//! chatty job costs disk, not memory, and loses nothing. Only if that file
//! cannot be written either are lines dropped past [`HARD_LIMIT`], and then
//! kumi says how many.

use clap::Args;
use kumi_core::control::{self, FrameDecoder, ToLauncher, ToRank};
use kumi_core::deadlock::{RankStatus, Snapshot};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::{Block, Paragraph, Row, Table};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Options of `kumi top`.
#[derive(Args, Debug)]
pub struct TopArgs {
    /// Job id (as `kumi ps` lists it); optional when exactly one job runs.
    #[arg(value_name = "JOB")]
    pub job: Option<String>,
}

/// Refresh interval.
const REFRESH: Duration = Duration::from_millis(500);

/// A read-only connection to a job's launcher.
pub struct Monitor {
    stream: UnixStream,
    decoder: FrameDecoder,
}

impl Monitor {
    /// Connects to `address` (`@name` for an abstract socket) as a monitor.
    pub fn connect(address: &str) -> Result<Monitor, String> {
        let name = address.strip_prefix('@').unwrap_or(address);
        let addr = SocketAddr::from_abstract_name(name.as_bytes())
            .map_err(|e| format!("bad socket name {address}: {e}"))?;
        let stream = UnixStream::connect_addr(&addr)
            .map_err(|e| format!("cannot reach the job at {address}: {e}"))?;
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .map_err(|e| e.to_string())?;
        let mut m = Monitor {
            stream,
            decoder: FrameDecoder::new(),
        };
        match m.read()? {
            ToRank::Challenge { .. } => {}
            other => {
                return Err(format!(
                    "the launcher sent {other:?} instead of a challenge"
                ))
            }
        }
        m.send(&ToLauncher::Monitor)?;
        Ok(m)
    }

    fn send(&mut self, msg: &ToLauncher) -> Result<(), String> {
        self.stream
            .write_all(&control::encode(msg))
            .map_err(|e| format!("lost the job: {e}"))
    }

    fn read(&mut self) -> Result<ToRank, String> {
        let mut buf = [0u8; 16 * 1024];
        loop {
            if let Some(m) = self.decoder.next_frame().map_err(|e| e.to_string())? {
                return Ok(m);
            }
            let n = self
                .stream
                .read(&mut buf)
                .map_err(|e| format!("lost the job: {e}"))?;
            if n == 0 {
                return Err("the job has ended".into());
            }
            self.decoder.push(&buf[..n]);
        }
    }

    /// The job's state now.
    pub fn snapshot(&mut self) -> Result<Snapshot, String> {
        self.send(&ToLauncher::Snapshot)?;
        match self.read()? {
            ToRank::Snapshot(s) => Ok(s),
            ToRank::Refused { reason } => Err(format!("the launcher refused: {reason}")),
            other => Err(format!("unexpected answer {other:?}")),
        }
    }
}

/// Control socket addresses of this user's running jobs, as (job id, address),
/// read from /proc/net/unix.
pub fn running_jobs() -> Vec<(String, String)> {
    use std::os::unix::fs::MetadataExt;
    // The owner of our own /proc entry is our uid (no unsafe call needed).
    let uid = std::fs::metadata("/proc/self").map_or(u32::MAX, |m| m.uid());
    let prefix = format!("@kumi-{uid}-");
    let table = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
    let mut jobs: Vec<(String, String)> = table
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(7))
        .filter_map(|p| {
            let job = p.strip_prefix(&prefix)?;
            Some((job.to_string(), p.to_string()))
        })
        .collect();
    jobs.sort();
    jobs.dedup();
    jobs
}

/// The address of `job`, or of the only running job.
pub fn resolve(job: Option<&str>) -> Result<String, String> {
    let jobs = running_jobs();
    match job {
        Some(j) => jobs
            .iter()
            .find(|(id, _)| id == j)
            .map(|(_, a)| a.clone())
            .ok_or_else(|| format!("no running job {j} of this user (see `kumi ps`)")),
        None => match jobs.as_slice() {
            [(_, a)] => Ok(a.clone()),
            [] => Err("no kumi job of this user is running".into()),
            many => Err(format!(
                "{} jobs are running ({}); name one (kumi ps lists them)",
                many.len(),
                many.iter()
                    .map(|(j, _)| j.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        },
    }
}

/// `kumi top`.
pub fn main(args: TopArgs) -> i32 {
    let address = match resolve(args.job.as_deref()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("kumi top: {e}");
            return 1;
        }
    };
    match run_tui(&address, &AtomicBool::new(false), false) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("kumi top: {e}");
            1
        }
    }
}

type MonitorThread = (Arc<AtomicBool>, std::thread::JoinHandle<()>);
static MONITOR: Mutex<Option<MonitorThread>> = Mutex::new(None);

/// `kumi run --monitor`: runs the monitor on a thread of the launcher.
pub fn spawn_monitor(address: &str) {
    let address = address.to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let handle = std::thread::spawn(move || {
        // The launcher answers only after this thread connected and the event
        // loop runs, which starts right after this function returns.
        let r = run_tui(&address, &flag, true);
        // The terminal is restored (or was never taken): give back the output.
        release_output();
        if let Err(e) = r {
            eprintln!("kumi top: {e}");
        }
    });
    if let Ok(mut m) = MONITOR.lock() {
        *m = Some((stop, handle));
    }
}

/// Ends the monitor of `kumi run --monitor` and gives the terminal back.
pub fn stop_monitor() {
    let t = MONITOR.lock().ok().and_then(|mut m| m.take());
    if let Some((stop, handle)) = t {
        // Relaxed: the flag carries no data; the join below orders the rest.
        stop.store(true, Ordering::Relaxed);
        let _ = handle.join();
    }
}

/// Bytes of held output kept in memory; the rest goes to a temporary file.
pub const MEM_LIMIT: usize = 4 << 20;
/// Bytes kept in memory at most when the temporary file cannot be written.
pub const HARD_LIMIT: usize = 256 << 20;
/// Lines the output pane remembers.
const TAIL: usize = 200;

/// The ranks' output while the monitor holds the terminal (see the module doc).
#[derive(Default)]
pub struct OutputLog {
    holding: bool,
    /// Held chunks (`true`: stderr) not yet moved to `spill`.
    mem: Vec<(bool, Vec<u8>)>,
    mem_bytes: usize,
    /// Older held chunks: records of a stream byte, a length (u32 LE), bytes.
    spill: Option<File>,
    spill_failed: bool,
    dropped_lines: u64,
    tail: VecDeque<(bool, String)>,
    lines: u64,
}

impl OutputLog {
    /// A log that passes everything through until [`OutputLog::hold`].
    pub const fn new() -> OutputLog {
        OutputLog {
            holding: false,
            mem: Vec::new(),
            mem_bytes: 0,
            spill: None,
            spill_failed: false,
            dropped_lines: 0,
            tail: VecDeque::new(),
            lines: 0,
        }
    }

    /// From now on, keep what is written.
    pub fn hold(&mut self) {
        self.holding = true;
    }

    /// Whole lines from the ranks (`err`: for stderr).
    pub fn write(&mut self, err: bool, bytes: &[u8], out: &mut dyn Write, errw: &mut dyn Write) {
        if !self.holding {
            put(err, bytes, out, errw);
            return;
        }
        // Whole lines: the chunk ends with a newline.
        let text = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        for l in text.split(|&b| b == b'\n') {
            self.lines += 1;
            if self.tail.len() == TAIL {
                self.tail.pop_front();
            }
            self.tail
                .push_back((err, String::from_utf8_lossy(l).into_owned()));
        }
        if self.mem_bytes + bytes.len() > MEM_LIMIT && !self.spill_failed {
            if let Err(e) = self.spill_mem() {
                self.spill_failed = true;
                let note = format!("kumi run: cannot hold output in a temporary file ({e}); keeping it in memory\n");
                self.mem.push((true, note.into_bytes()));
            }
        }
        if self.mem_bytes + bytes.len() > HARD_LIMIT {
            self.dropped_lines += bytes.iter().filter(|&&b| b == b'\n').count() as u64;
            return;
        }
        self.mem_bytes += bytes.len();
        self.mem.push((err, bytes.to_vec()));
    }

    fn spill_mem(&mut self) -> std::io::Result<()> {
        if self.spill.is_none() {
            self.spill = Some(unnamed_temp_file()?);
        }
        let f = self.spill.as_mut().expect("just created");
        let mut buf = Vec::with_capacity(self.mem_bytes + 5 * self.mem.len());
        for (err, chunk) in &self.mem {
            buf.push(u8::from(*err));
            buf.extend_from_slice(&(chunk.len() as u32).to_le_bytes());
            buf.extend_from_slice(chunk);
        }
        f.write_all(&buf)?;
        self.mem.clear();
        self.mem_bytes = 0;
        Ok(())
    }

    /// Writes everything held, in order, and passes later output through.
    pub fn release(&mut self, out: &mut dyn Write, errw: &mut dyn Write) {
        if !self.holding {
            return;
        }
        self.holding = false;
        if let Some(mut f) = self.spill.take() {
            let mut all = Vec::new();
            if let Err(e) = f.rewind().and_then(|_| f.read_to_end(&mut all)) {
                let _ = writeln!(
                    errw,
                    "kumi run: lost the output held in a temporary file: {e}"
                );
            }
            let mut rest = &all[..];
            while rest.len() >= 5 {
                let n = u32::from_le_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
                let Some(chunk) = rest.get(5..5 + n) else {
                    break;
                };
                put(rest[0] == 1, chunk, out, errw);
                rest = &rest[5 + n..];
            }
        }
        for (err, chunk) in self.mem.drain(..) {
            put(err, &chunk, out, errw);
        }
        self.mem_bytes = 0;
        if self.dropped_lines > 0 {
            let _ = writeln!(
                errw,
                "kumi run: {} lines of output were dropped while the monitor was open",
                self.dropped_lines
            );
        }
        let _ = out.flush();
        let _ = errw.flush();
    }
}

/// Writes `bytes` to `errw` or `out` (errors ignored, as the launcher's own
/// output does: a closed stdout does not stop the job).
fn put(err: bool, bytes: &[u8], out: &mut dyn Write, errw: &mut dyn Write) {
    if err {
        let _ = errw.write_all(bytes);
        let _ = errw.flush();
    } else {
        let _ = out.write_all(bytes);
        let _ = out.flush();
    }
}

/// A file in the temporary directory that has no name any more: it is removed
/// when closed, however the process ends.
fn unnamed_temp_file() -> std::io::Result<File> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let path = std::env::temp_dir().join(format!("kumi-monitor-{}-{nanos}", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(f)
}

static OUTPUT: Mutex<OutputLog> = Mutex::new(OutputLog::new());

/// `kumi run --monitor`: hold the ranks' output from now on (see [`output`]).
pub fn hold_output() {
    if let Ok(mut l) = OUTPUT.lock() {
        l.hold();
    }
}

/// The job's output sink under `kumi run --monitor`.
pub fn output(err: bool, bytes: &[u8]) {
    match OUTPUT.lock() {
        Ok(mut l) => l.write(err, bytes, &mut std::io::stdout(), &mut std::io::stderr()),
        Err(_) => {
            let _ = if err {
                std::io::stderr().write_all(bytes)
            } else {
                std::io::stdout().write_all(bytes)
            };
        }
    }
}

/// Writes the held output out and stops holding (idempotent).
pub fn release_output() {
    if let Ok(mut l) = OUTPUT.lock() {
        l.release(&mut std::io::stdout(), &mut std::io::stderr());
    }
}

fn output_tail() -> (Vec<(bool, String)>, u64) {
    OUTPUT
        .lock()
        .map(|l| (l.tail.iter().cloned().collect(), l.lines))
        .unwrap_or_default()
}

fn run_tui(address: &str, stop: &AtomicBool, show_output: bool) -> Result<(), String> {
    let mut monitor = Monitor::connect(address)?;
    let mut prev: Option<(Instant, Snapshot)> = None;
    let mut snap = monitor.snapshot()?;
    let mut taken = Instant::now();
    let mut terminal = ratatui::try_init().map_err(|e| format!("cannot use the terminal: {e}"))?;
    let result = (|| -> Result<(), String> {
        let mut ended = None;
        loop {
            let mut view = View::new(&snap, taken, prev.as_ref(), ended.as_deref());
            if show_output {
                view.output = Some(output_tail());
            }
            terminal
                .draw(|f| view.draw(f))
                .map_err(|e| format!("cannot draw: {e}"))?;
            let next = Instant::now() + REFRESH;
            loop {
                // Relaxed: see stop_monitor.
                if stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
                let left = next.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                match read_key(left.min(Duration::from_millis(100))) {
                    // q, Esc or Ctrl-C (the terminal is in raw mode).
                    Key::Byte(b'q' | 0x1b | 0x03) => return Ok(()),
                    Key::Byte(_) | Key::None => {}
                    Key::Gone => {
                        return Err(
                            "the terminal went away; the job goes on without the view".into()
                        )
                    }
                }
            }
            if ended.is_none() {
                match monitor.snapshot() {
                    Ok(s) => {
                        prev = Some((taken, std::mem::replace(&mut snap, s)));
                        taken = Instant::now();
                    }
                    Err(e) => ended = Some(e),
                }
            }
        }
    })();
    ratatui::restore();
    result
}

/// One key press, read straight from the terminal (standard input, in raw
/// mode). Not crossterm's reader: when the terminal hangs up (its window
/// closed, its ssh session died) a read returns end-of-file forever, and
/// crossterm's reader retries without end; here that ends the view.
enum Key {
    Byte(u8),
    None,
    Gone,
}

fn read_key(timeout: Duration) -> Key {
    let mut p = libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, on standard input, with a bounded timeout.
    let n = unsafe { libc::poll(&mut p, 1, timeout.as_millis().min(i32::MAX as u128) as i32) };
    if n <= 0 {
        return Key::None;
    }
    if p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
        && p.revents & libc::POLLIN == 0
    {
        return Key::Gone;
    }
    let mut b = [0u8; 1];
    // SAFETY: reads at most one byte into a one-byte buffer we own.
    match unsafe { libc::read(0, b.as_mut_ptr().cast(), 1) } {
        1 => Key::Byte(b[0]),
        0 => Key::Gone,
        _ => Key::None,
    }
}

/// What one refresh shows.
struct View {
    title: String,
    rows: Vec<[String; 9]>,
    states: Vec<Style>,
    footer: String,
    /// The ranks' latest lines (`true`: stderr), under `kumi run --monitor`.
    output: Option<(Vec<(bool, String)>, u64)>,
}

fn rate(now: u64, before: u64, secs: f64) -> f64 {
    if secs <= 0.0 {
        0.0
    } else {
        now.saturating_sub(before) as f64 / secs
    }
}

/// Messages and bytes in and out, point-to-point and collective together.
fn all_traffic(c: &kumi_core::deadlock::RankCounters) -> [u64; 4] {
    let t = c.total();
    [
        t.msgs_in + t.coll_msgs_in,
        t.msgs_out + t.coll_msgs_out,
        t.bytes_in + t.coll_bytes_in,
        t.bytes_out + t.coll_bytes_out,
    ]
}

/// 1234567 -> "1.2M".
pub fn human(x: f64) -> String {
    match x {
        x if x >= 1e9 => format!("{:.1}G", x / 1e9),
        x if x >= 1e6 => format!("{:.1}M", x / 1e6),
        x if x >= 1e3 => format!("{:.1}k", x / 1e3),
        x => format!("{x:.0}"),
    }
}

/// The state column: computing, blocked in what for how long, ended.
pub fn state_text(r: &RankStatus) -> String {
    match (&r.blocked, r.ended, r.pid) {
        (_, true, _) => "ended".into(),
        (_, _, 0) => "starting".into(),
        (Some(w), _, _) => format!(
            "blocked {:.1}s in {}",
            r.blocked_for_ms as f64 / 1000.0,
            w.describe()
        ),
        (None, _, _) => "computing".into(),
    }
}

impl View {
    fn new(
        snap: &Snapshot,
        taken: Instant,
        prev: Option<&(Instant, Snapshot)>,
        ended: Option<&str>,
    ) -> View {
        let mut rows = Vec::new();
        let mut states = Vec::new();
        for r in &snap.ranks {
            let before = prev.and_then(|(t, s)| Some((*t, s.ranks.get(r.rank as usize)?)));
            let secs = before.map_or(0.0, |(t, _)| (taken - t).as_secs_f64());
            let now_t = all_traffic(&r.counters);
            let (b_t, b_cpu) = before.map_or((now_t, r.cpu_ms), |(_, b)| {
                (all_traffic(&b.counters), b.cpu_ms)
            });
            let cpu = match (r.cpu_ms, b_cpu) {
                (Some(c), Some(b)) if secs > 0.0 => {
                    format!("{:.0}", 100.0 * c.saturating_sub(b) as f64 / 1000.0 / secs)
                }
                (Some(_), _) => "0".into(),
                _ => "-".into(),
            };
            let blocked_pct = if r.counters.wall_us > 0 {
                100.0 * r.counters.blocked_us as f64 / r.counters.wall_us as f64
            } else {
                0.0
            };
            states.push(match (&r.blocked, r.ended) {
                (_, true) => Style::default().fg(Color::DarkGray),
                (Some(_), _) => Style::default().fg(Color::Yellow),
                (None, _) => Style::default().fg(Color::Green),
            });
            rows.push([
                r.rank.to_string(),
                r.host.clone(),
                r.pid.to_string(),
                cpu,
                human(rate(now_t[0], b_t[0], secs)),
                human(rate(now_t[1], b_t[1], secs)),
                human(rate(now_t[2], b_t[2], secs)),
                human(rate(now_t[3], b_t[3], secs)),
                format!("{blocked_pct:.0}%  {}", state_text(r)),
            ]);
        }
        View {
            title: format!(
                " kumi top: job {}  {}  {} ranks  {:.0} s ",
                snap.job,
                snap.program,
                snap.size,
                snap.elapsed_ms as f64 / 1000.0
            ),
            rows,
            states,
            output: None,
            footer: match ended {
                Some(e) => format!("{e}.  q: quit"),
                None => "q: quit (the job goes on)".into(),
            },
        }
    }

    fn draw(&self, f: &mut ratatui::Frame<'_>) {
        let (main, pane, foot) = match &self.output {
            Some(_) => {
                let table = (self.rows.len() as u16 + 3).min(f.area().height.saturating_sub(6));
                let [m, p, fo] = Layout::vertical([
                    Constraint::Length(table.max(3)),
                    Constraint::Min(3),
                    Constraint::Length(1),
                ])
                .areas(f.area());
                (m, Some(p), fo)
            }
            None => {
                let [m, fo] =
                    Layout::vertical([Constraint::Min(3), Constraint::Length(1)]).areas(f.area());
                (m, None, fo)
            }
        };
        let header = Row::new([
            "RANK",
            "HOST",
            "PID",
            "CPU%",
            "MSG/S IN",
            "OUT",
            "B/S IN",
            "OUT",
            "BLOCKED  STATE",
        ])
        .style(Style::default().add_modifier(Modifier::BOLD));
        let rows = self
            .rows
            .iter()
            .zip(&self.states)
            .map(|(r, s)| Row::new(r.clone()).style(*s));
        let table = Table::new(
            rows,
            [
                Constraint::Length(5),
                Constraint::Length(12),
                Constraint::Length(8),
                Constraint::Length(5),
                Constraint::Length(9),
                Constraint::Length(7),
                Constraint::Length(8),
                Constraint::Length(7),
                Constraint::Min(20),
            ],
        )
        .header(header)
        .block(Block::bordered().title(self.title.as_str()));
        f.render_widget(table, main);
        if let (Some(area), Some((lines, total))) = (pane, &self.output) {
            let room = area.height.saturating_sub(2) as usize;
            let shown: Vec<ratatui::text::Line<'_>> = lines[lines.len().saturating_sub(room)..]
                .iter()
                .map(|(err, l)| {
                    let style = if *err {
                        Style::default().fg(Color::Red)
                    } else {
                        Style::default()
                    };
                    ratatui::text::Line::styled(l.as_str(), style)
                })
                .collect();
            let title =
                format!(" output ({total} lines; all of it is printed when this view closes) ");
            f.render_widget(
                Paragraph::new(shown).block(Block::bordered().title(title)),
                area,
            );
        }
        f.render_widget(Paragraph::new(self.footer.as_str()), foot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_output_comes_out_in_order_through_the_temporary_file() {
        let mut log = OutputLog::new();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        log.write(false, b"before\n", &mut out, &mut err);
        log.hold();
        let (mut want_out, mut want_err) = (b"before\n".to_vec(), Vec::new());
        let n = 200_000;
        for i in 0..n {
            let line = format!("line {i} {}\n", "x".repeat(40));
            let e = i % 7 == 0;
            log.write(e, line.as_bytes(), &mut out, &mut err);
            if e { &mut want_err } else { &mut want_out }.extend_from_slice(line.as_bytes());
        }
        assert_eq!(out, b"before\n", "nothing goes through while held");
        assert!(err.is_empty());
        assert!(log.spill.is_some(), "more than MEM_LIMIT went to the file");
        assert!(log.mem_bytes <= MEM_LIMIT);
        assert_eq!(log.lines, n);
        assert_eq!(log.tail.len(), TAIL);
        assert_eq!(
            log.tail.back().map(|(_, l)| l.as_str()),
            Some(format!("line {} {}", n - 1, "x".repeat(40)).as_str())
        );
        log.release(&mut out, &mut err);
        log.write(false, b"after\n", &mut out, &mut err);
        want_out.extend_from_slice(b"after\n");
        assert!(out == want_out, "stdout differs");
        assert!(err == want_err, "stderr differs");
        assert_eq!(log.dropped_lines, 0);
    }
}
