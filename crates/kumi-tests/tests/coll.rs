//! Collectives and the combining service, run as real jobs through `kumi run`:
//! every collective, operation and type against a serial evaluation at every
//! process count 1..17, the two-level paths (ranks spread over pretend hosts,
//! uneven), the shared-memory areas under stress and switched off,
//! fetch_add serialized at every arrival level, and intercommunicators.

use kumi_tests::{bin, kumi_run, text};

fn expect(n: usize, env: &[(&str, &str)], args: &[&str], line: &str) {
    let o = kumi_run(n, env, args);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains(line),
        "np={n} env={env:?}: {}",
        text(&o)
    );
}

#[test]
fn every_collective_op_and_type_on_1_to_17_ranks() {
    let coll = bin("coll");
    for n in 1..=17 {
        // Every third size forces the long-message algorithms (ring allreduce,
        // scatter-allgather bcast) with small thresholds.
        // Single copy where a case is about it; elsewhere as the host
        // chooses (`KUMI_SINGLE_COPY=auto`).
        let env: &[(&str, &str)] = if n % 3 == 1 {
            &[
                ("KUMI_SINGLE_COPY", "on"),
                ("KUMI_COLL_ALLREDUCE_RING", "4096"),
                ("KUMI_COLL_ALLREDUCE_LONG", "512"),
                ("KUMI_COLL_BCAST_LONG", "1024"),
                ("KUMI_COLL_ALLGATHER_LONG", "64"),
                // Single-copy allreduce in odd-sized pieces (rounded down
                // to whole elements), many per block.
                ("KUMI_COLL_PIECE", "4000"),
                // An alltoallv of blocks by single copy beside longer-than-
                // a-share blocks in rounds through the area.
                ("KUMI_COLL_COPY_MIN", "150000"),
            ]
        } else if n % 3 == 2 {
            // The long bcast the other way round from the default (single
            // copy on a core per rank, the area when oversubscribed).
            if n <= 2 {
                &[("KUMI_SINGLE_COPY", "on"), ("KUMI_COLL_BCAST_COPY", "area")]
            } else {
                &[
                    ("KUMI_SINGLE_COPY", "on"),
                    ("KUMI_COLL_BCAST_COPY", "single"),
                ]
            }
        } else if n % 2 == 0 {
            // Long commutative allreduces through the area (the default
            // times single copy and the area once each and keeps the faster).
            &[("KUMI_COLL_ALLREDUCE_COPY", "area")]
        } else {
            &[]
        };
        expect(
            n,
            env,
            &[coll.to_str().unwrap()],
            &format!("coll: all checks passed on {n} ranks"),
        );
    }
}

#[test]
fn scans_go_as_a_chain_with_more_than_two_ranks_a_core() {
    // Whatever the machine's cores: three ranks a core chain the short
    // scans, four the long ones too (`shm::scan_chains`).
    let coll = bin("coll");
    for (n, cores) in [(3, "1"), (4, "1"), (5, "2")] {
        expect(
            n,
            &[("KUMI_LOCAL_CORES", cores)],
            &[coll.to_str().unwrap()],
            &format!("coll: all checks passed on {n} ranks"),
        );
    }
}

#[test]
fn two_level_collectives_over_uneven_pretend_hosts() {
    let coll = bin("coll");
    for (n, hosts) in [(5, "2"), (7, "3"), (10, "3"), (13, "4")] {
        expect(
            n,
            &[("KUMI_COLL_HOSTS", hosts)],
            &[coll.to_str().unwrap()],
            &format!("coll: all checks passed on {n} ranks"),
        );
    }
    // Single-level algorithms stay available.
    expect(
        6,
        &[("KUMI_COLL_HOSTS", "2"), ("KUMI_COLL_HIERARCHICAL", "0")],
        &[coll.to_str().unwrap()],
        "coll: all checks passed on 6 ranks",
    );
}

#[test]
fn collectives_without_the_shared_memory_areas() {
    // KUMI_COLL_SHM=off: every collective runs through messages again, on one
    // level and on two.
    let coll = bin("coll");
    for (n, hosts) in [(2, "0"), (5, "0"), (8, "0"), (7, "3")] {
        expect(
            n,
            &[("KUMI_COLL_SHM", "off"), ("KUMI_COLL_HOSTS", hosts)],
            &[coll.to_str().unwrap()],
            &format!("coll: all checks passed on {n} ranks"),
        );
    }
}

#[test]
fn shared_memory_collectives_back_to_back_with_random_delays() {
    // Barriers, (non-commutative) reductions, chunked broadcasts and
    // alltoalls through the areas on world, a dup and reversed halves, with
    // delays long enough for waiting ranks to sleep; oversubscribed up to 16
    // ranks on the machine's cores. Then the two-level path (areas inside
    // pretend hosts) and the message path for comparison.
    let prog = bin("coll_stress");
    let p = prog.to_str().unwrap();
    for (n, iters, env) in [
        (2, "3000", vec![]),
        // Long reductions and broadcasts by single copy, or the trials
        // between it and the area.
        (3, "2000", vec![("KUMI_SINGLE_COPY", "on")]),
        (8, "1500", vec![]),
        (16, "600", vec![]),
        (9, "1000", vec![("KUMI_COLL_HOSTS", "3")]),
        (6, "1000", vec![("KUMI_COLL_SHM", "off")]),
        (4, "1000", vec![("KUMI_COLL_ALLREDUCE_COPY", "area")]),
        (
            5,
            "1000",
            vec![
                ("KUMI_SINGLE_COPY", "on"),
                ("KUMI_COLL_ALLREDUCE_COPY", "single"),
            ],
        ),
        // Without single copy, broadcasts above the cap leave the area for
        // message schedules inside the host; the smaller ones stay.
        (
            4,
            "1000",
            vec![
                ("KUMI_SINGLE_COPY", "off"),
                ("KUMI_COLL_SHM_BCAST_MAX", "4096"),
            ],
        ),
        // Oversubscribed ranks that never keep their core for mates, and
        // ones that keep it as long as their mates wait (the default: 50 us).
        (6, "1000", vec![("KUMI_MATE_SPIN_US", "0")]),
        (4, "1000", vec![("KUMI_MATE_SPIN_US", "100000")]),
        // Every wait sleeps at once, and a missed wake-up would sleep for
        // 30 s while the publisher waits for the sleeper: the deadlock
        // detector would report it. Two ranks on their own cores publish
        // with only a compiler fence and leave the sleeper's `membarrier`
        // to order them (`coll_area::publish`).
        (
            2,
            "3000",
            vec![
                ("KUMI_POLLS", "1"),
                ("KUMI_SPIN_US", "0"),
                ("KUMI_YIELD_US", "0"),
                ("KUMI_SLEEP_MS", "30000"),
            ],
        ),
    ] {
        expect(
            n,
            &env,
            &[p, iters, "delays"],
            &format!("coll_stress: all checks passed on {n} ranks"),
        );
    }
}

#[test]
fn fetch_add_is_serialized_at_every_arrival_level() {
    let prog = bin("coll_combine");
    let p = prog.to_str().unwrap();
    for n in [1, 2, 3, 6, 9] {
        expect(
            n,
            &[],
            &[p, "15"],
            &format!("coll_combine: all checks passed on {n} ranks"),
        );
    }
    // Random delays between calls, ranks over pretend hosts.
    expect(
        7,
        &[("KUMI_COLL_HOSTS", "3")],
        &[p, "8", "delays"],
        "coll_combine: all checks passed on 7 ranks",
    );
}

#[test]
fn combining_store_overflow_degrades_to_forwarding() {
    // A store of 0 or 1 entries: requests go up uncombined, nothing is lost.
    let prog = bin("coll_combine");
    for store in ["0", "1"] {
        expect(
            8,
            &[("KUMI_COMBINE_STORE", store)],
            &[prog.to_str().unwrap(), "10"],
            "coll_combine: all checks passed on 8 ranks",
        );
    }
}

/// Intercommunicators through the Rust API: the exchange across, the
/// broadcast, splits and the merge (the C ABI's `intercoll.c` covers every
/// collective on them).
#[test]
fn intercommunicators_exchange_split_and_merge() {
    let inter = bin("inter");
    for n in [2, 3, 4, 5, 8, 9] {
        expect(
            n,
            &[],
            &[inter.to_str().unwrap()],
            &format!("inter: all checks passed on {n} ranks"),
        );
    }
}

#[test]
fn collectives_and_combining_across_namespace_hosts_with_uneven_ranks() {
    use kumi_tests::netns::{self, Cluster};
    if netns::skip_unless_root("collectives_and_combining_across_namespace_hosts_with_uneven_ranks")
    {
        return;
    }
    let coll = bin("coll");
    let combine = bin("coll_combine");
    let inter = bin("inter");
    for (k, slots) in [(2, vec![(0, 2), (1, 3)]), (3, vec![(0, 1), (1, 2), (2, 3)])] {
        let c = Cluster::create(k).unwrap_or_else(|e| panic!("cannot create {k} test hosts: {e}"));
        let n: usize = slots.iter().map(|s| s.1).sum();
        for (prog, args, line) in [
            (
                &coll,
                vec![],
                format!("coll: all checks passed on {n} ranks"),
            ),
            (
                &combine,
                vec!["6"],
                format!("coll_combine: all checks passed on {n} ranks"),
            ),
            (
                &inter,
                vec![],
                format!("inter: all checks passed on {n} ranks"),
            ),
        ] {
            let mut argv = vec![prog.to_str().unwrap()];
            argv.extend(args);
            let o = c.kumi_run(n, &slots, &[], &argv);
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(
                o.status.success() && out.contains(&line),
                "{k} hosts {slots:?}: {}",
                text(&o)
            );
        }
        assert!(c.all_pids().is_empty(), "processes left in the test hosts");
    }
}
