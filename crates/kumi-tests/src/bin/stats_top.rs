//! A job for the `kumi top` test: rank 0 prints the job id, then waits (outside
//! kumi) until the file named by its argument exists, then sends one message to
//! the last rank, which waits for it in a receive all along; the other ranks go
//! straight to finalize.

use std::time::Duration;

fn main() {
    let go = std::env::args().nth(1).expect("file to wait for");
    let universe = kumi::init().expect("init");
    let w = universe.world();
    let (me, n) = (w.rank() as i32, w.size() as i32);
    if me == 0 {
        println!("job {}", universe.job());
        while !std::path::Path::new(&go).exists() {
            std::thread::sleep(Duration::from_millis(50));
        }
        w.send(&[1u8], n - 1, 1).expect("send");
    } else if me == n - 1 {
        let mut b = [0u8];
        w.recv(&mut b, 0, 1).expect("recv");
    }
    println!("rank {me} done");
}
