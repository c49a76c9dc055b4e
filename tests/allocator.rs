//! The caching allocator against PyTorch's published rules, random sequences, fragmentation.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use oomlab::memory::allocator::{CachingAllocator, LARGE_BUFFER, Pool, SMALL_BUFFER};
use oomlab::model::init::Rng;

const MIB: u64 = 1 << 20;

fn single_block(bytes: u64) -> (u64, u64, Pool) {
    let mut a = CachingAllocator::new(1 << 30);
    let p = a.malloc(bytes, ()).expect("fits");
    let seg = a.segments().next().expect("one segment");
    a.check_invariants().expect("invariants");
    (p.size, seg.size, seg.pool)
}

#[test]
fn pytorch_sizing_vectors() {
    assert_eq!(single_block(1), (512, SMALL_BUFFER, Pool::Small), "1 B → 512 B block in a 2 MiB small segment");
    assert_eq!(single_block(1_048_577), (1_049_088, LARGE_BUFFER, Pool::Large));
    assert_eq!(single_block(10_485_761), (10_486_272, 12_582_912, Pool::Large));
    // a 20 MiB free block serving 19 MiB + 512 B is not split (remainder 1 MiB − 512 B ≤ 1 MiB)
    let mut a = CachingAllocator::new(1 << 30);
    let p = a.malloc(20 * MIB, ()).expect("fits");
    assert_eq!(a.segments().next().map(|s| s.size), Some(20 * MIB));
    a.free(p);
    let q = a.malloc(19 * MIB + 512, ()).expect("fits");
    assert_eq!(q.size, 20 * MIB, "not split");
    assert_eq!(a.stats().segments, 1, "served from the cached segment");
    a.check_invariants().expect("invariants");
}

#[test]
fn small_blocks_split_and_merge_back() {
    let mut a = CachingAllocator::new(64 * MIB);
    let x = a.malloc(1000, "x").expect("fits");
    let y = a.malloc(3000, "y").expect("fits");
    assert_eq!((x.size, y.size), (1024, 3072));
    assert_eq!((x.offset, y.offset), (0, 1024));
    assert_eq!(x.segment, y.segment);
    a.free(x);
    a.free(y);
    a.check_invariants().expect("invariants");
    let s = a.stats();
    assert_eq!((s.allocated_bytes, s.reserved_bytes), (0, SMALL_BUFFER), "freed memory stays reserved");
    assert_eq!(a.largest_free_block(), SMALL_BUFFER, "neighbours merged into one block");
}

#[test]
fn random_sequences_keep_every_invariant() {
    for seed in 0..8u64 {
        let capacity = [48, 64, 100, 256][seed as usize % 4] * MIB;
        let mut a = CachingAllocator::new(capacity);
        let mut rng = Rng::new(seed);
        let mut live: Vec<oomlab::memory::Placement> = Vec::new();
        let mut ooms = 0;
        for step in 0..3000 {
            if live.is_empty() || rng.uniform() < 0.55 {
                // mostly small, sometimes large, sometimes huge requests
                let bytes = match rng.below(10) {
                    0..=5 => 1 + rng.below(64 * 1024) as u64,
                    6..=8 => 1 + rng.below(8 << 20) as u64,
                    _ => 1 + rng.below(40 << 20) as u64,
                };
                match a.malloc(bytes, step) {
                    Ok(p) => {
                        assert!(p.size >= bytes);
                        live.push(p);
                    }
                    Err(oom) => {
                        ooms += 1;
                        assert!(oom.message("test").contains("Tried to allocate"));
                    }
                }
            } else {
                let i = rng.below(live.len());
                assert!(a.free(live.swap_remove(i)));
            }
            if step % 50 == 0 {
                a.check_invariants().unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}"));
                // no two live blocks overlap
                let mut spans: Vec<_> = live.iter().map(|p| (p.segment, p.offset, p.offset + p.size)).collect();
                spans.sort();
                for w in spans.windows(2) {
                    assert!(w[0].0 != w[1].0 || w[0].2 <= w[1].1, "overlap {w:?}");
                }
            }
        }
        for p in live.drain(..) {
            assert!(a.free(p));
        }
        a.check_invariants().expect("invariants");
        assert_eq!(a.stats().allocated_bytes, 0, "freeing everything returns allocated to 0");
        assert_eq!(a.stats().requested_bytes, 0);
        assert!(!a.free(oomlab::memory::Placement { segment: oomlab::memory::SegmentId(999), offset: 0, size: 512 }));
        println!("seed {seed}: {ooms} OOMs, peak reserved {} MiB", a.stats().peak_reserved_bytes / MIB);
    }
}

#[test]
fn fragmentation_causes_oom_although_enough_memory_is_free() {
    // 60 MiB: three 20 MiB large segments. Fill them with 2 MiB blocks, free every other one:
    // 30 MiB is free, but no free block is larger than 2 MiB, so 4 MiB cannot be placed.
    let mut a = CachingAllocator::new(60 * MIB);
    let blocks: Vec<_> = (0..30).map(|i| a.malloc(2 * MIB, i).expect("fits")).collect();
    assert_eq!(a.stats().reserved_bytes, 60 * MIB);
    for p in blocks.iter().step_by(2) {
        a.free(*p);
    }
    let s = a.stats();
    assert_eq!(s.reserved_bytes - s.allocated_bytes, 30 * MIB);
    let err = a.malloc(4 * MIB, 99).expect_err("fragmented");
    assert_eq!(err.largest_free_block, 2 * MIB);
    let msg = err.message("activations h.0.mlp.c_fc.out for op h.0.mlp.c_fc");
    println!("{msg}");
    assert!(msg.starts_with("GPU out of memory. Tried to allocate 20.00 MiB"), "{msg}");
    assert!(msg.contains("GPU 0 has a total capacity of 60.00 MiB of which 0 bytes is free"), "{msg}");
    assert!(
        msg.contains("30.00 MiB is allocated by oomlab, and 30.00 MiB is reserved by oomlab but unallocated"),
        "{msg}"
    );
    assert!(msg.contains("fragmented"), "{msg}");
    a.check_invariants().expect("invariants");
}

#[test]
fn cached_segments_are_released_before_oom() {
    // A cached 20 MiB segment stands in the way of a 40 MiB request in 50 MiB: released, retried.
    let mut a = CachingAllocator::new(50 * MIB);
    let p = a.malloc(5 * MIB, "a").expect("fits");
    a.free(p);
    assert_eq!(a.stats().reserved_bytes, 20 * MIB);
    let q = a.malloc(40 * MIB, "b").expect("fits after releasing the cache");
    assert_eq!(q.size, 40 * MIB);
    assert_eq!(a.stats().segment_releases, 1);
    a.check_invariants().expect("invariants");
}
