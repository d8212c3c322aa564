//! `kumi clean`: remove leftovers of dead jobs (logic in `kumi_launch::clean`).

use clap::Args;

const CLEAN_HELP: &str = "\
kumi's jobs leave no files in the normal case (the control socket is abstract and
the shared segment a memfd). Named shared-memory segments in /dev/shm can outlive
a job whose processes were all killed; this command finds them, checks every
process recorded as an owner is gone, and removes them. A segment with a live
owner is never touched. A file with kumi's name prefix that cannot be read as a
segment is removed only when it is older than one minute.

EXAMPLES:
    kumi clean --dry-run     list what would be removed
    kumi clean               remove leftovers

EXIT STATUS:
    0 on success, 1 if something could not be inspected or removed.";

/// Options of `kumi clean`.
#[derive(Args, Debug)]
#[command(after_help = CLEAN_HELP)]
pub struct CleanArgs {
    /// Only list what would be removed; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Cleans; returns the exit code.
pub fn main(args: CleanArgs) -> i32 {
    let items = match kumi_launch::clean::clean(args.dry_run) {
        Ok(items) => items,
        Err(e) => {
            eprintln!(
                "kumi clean: cannot read {}: {e}",
                kumi_launch::clean::SHM_DIR
            );
            return 1;
        }
    };
    for item in &items {
        println!("{item}");
    }
    println!(
        "kumi clean: {}",
        kumi_launch::clean::summary(&items, args.dry_run)
    );
    if items.iter().any(|i| matches!(i.removed, Some(Err(_)))) {
        1
    } else {
        0
    }
}
