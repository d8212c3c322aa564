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

use clap::Args;
use kumi_core::control::{self, FrameDecoder, ToLauncher, ToRank};
use kumi_core::deadlock::{RankStatus, Snapshot};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::{Block, Paragraph, Row, Table};
use std::io::{Read, Write};
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
fn resolve(job: Option<&str>) -> Result<String, String> {
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
                "{} jobs are running ({}); name one: kumi top JOB",
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
    match run_tui(&address, &AtomicBool::new(false)) {
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
        if let Err(e) = run_tui(&address, &flag) {
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

fn run_tui(address: &str, stop: &AtomicBool) -> Result<(), String> {
    let mut monitor = Monitor::connect(address)?;
    let mut prev: Option<(Instant, Snapshot)> = None;
    let mut snap = monitor.snapshot()?;
    let mut taken = Instant::now();
    let mut terminal = ratatui::try_init().map_err(|e| format!("cannot use the terminal: {e}"))?;
    let result = (|| -> Result<(), String> {
        let mut ended = None;
        loop {
            let view = View::new(&snap, taken, prev.as_ref(), ended.as_deref());
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
                if event::poll(left.min(Duration::from_millis(100))).map_err(|e| e.to_string())? {
                    if let Event::Key(k) = event::read().map_err(|e| e.to_string())? {
                        let quit = k.kind == KeyEventKind::Press
                            && (matches!(k.code, KeyCode::Char('q') | KeyCode::Esc)
                                || (k.code == KeyCode::Char('c')
                                    && k.modifiers.contains(KeyModifiers::CONTROL)));
                        if quit {
                            return Ok(());
                        }
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

/// What one refresh shows.
struct View {
    title: String,
    rows: Vec<[String; 9]>,
    states: Vec<Style>,
    footer: String,
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
            footer: match ended {
                Some(e) => format!("{e}.  q: quit"),
                None => "q: quit (the job goes on)".into(),
            },
        }
    }

    fn draw(&self, f: &mut ratatui::Frame<'_>) {
        let [main, foot] =
            Layout::vertical([Constraint::Min(3), Constraint::Length(1)]).areas(f.area());
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
        f.render_widget(Paragraph::new(self.footer.as_str()), foot);
    }
}
