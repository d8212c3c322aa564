//! Every rank says who and where it is.
//!
//! `kumi run -n 4 target/release/examples/hello`
fn main() -> Result<(), kumi::Error> {
    let universe = kumi::init()?;
    let world = universe.world();
    println!(
        "hello from rank {} of {} on {} (local rank {} of {}, job {})",
        world.rank(),
        world.size(),
        kumi::hostname(),
        universe.local_rank(),
        universe.local_size(),
        universe.job()
    );
    Ok(())
}
