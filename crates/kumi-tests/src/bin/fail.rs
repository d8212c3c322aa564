//! Rank programs that fail on purpose, for the launcher's failure tests.
//!
//! `fail <mode> <victim>`: rank `victim` fails by `mode` while every other rank
//! waits in a receive that never matches (so the launcher must stop them):
//! - `segv`: dereferences a null pointer (SIGSEGV) while inside no kumi call;
//! - `exit3`: exits with code 3;
//! - `abort`: calls kumi's abort with code 7;
//! - `panic`: panics (the universe is dropped while unwinding: it must end
//!   the job, not wait in finalize's barrier for ranks that never come);
//! - `hang`: does nothing special (every rank waits; used for signal tests).
//!
//! Each rank first prints `pid <rank> <pid>` so tests can check it is gone.

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().expect("mode");
    let victim: usize = args.next().map_or(1, |a| a.parse().expect("victim rank"));
    let universe = kumi::init().expect("init");
    let w = universe.world();
    println!("pid {} {}", w.rank(), std::process::id());
    w.barrier().expect("barrier");
    if w.rank() == victim {
        std::thread::sleep(std::time::Duration::from_millis(200));
        match mode.as_str() {
            "segv" => {
                // SAFETY: none — this is the point: a deliberate null dereference
                // so the test can see how the launcher reports a SIGSEGV.
                #[allow(clippy::zero_ptr)]
                unsafe {
                    std::ptr::write_volatile(0 as *mut u32, 1)
                };
            }
            "exit3" => std::process::exit(3),
            "abort" => universe.abort(7, "the test asked for it"),
            "panic" => panic!("the test panics on purpose"),
            _ => {}
        }
    }
    let mut b = [0u8];
    let _ = w.recv(&mut b, kumi::ANY_SOURCE, 12345);
    unreachable!("nobody sends tag 12345");
}
